/*
 * sync.c — sync benchmarks against a running ferry-server (bench/run starts one).
 *
 *   sync BASE_URL DIR EMAIL upload N       N items written on a device, to durable acknowledgement
 *   sync BASE_URL DIR EMAIL bootstrap      a fresh device downloads everything (complexity <= 4)
 *   sync BASE_URL DIR EMAIL latency N [BASE_URL_B]
 *                                          write on device A -> notification on device B, N times;
 *                                          B connects to BASE_URL_B when given (another node of
 *                                          the same database), else to BASE_URL like A
 *
 * Prints one line of figures per mode (rows/s, peak memory of this process, p50/p99), then a
 * `RESULT key=value ...` line for scripts (bench/run reads those).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#define BENCH_NAME "sync bench"
#include "bench_waiter.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct device {
  ferry_app_t *app;
  ferry_user_t *user;
  ferry_sync_session_t *session;
  ferry_db_t *db;
  ferry_class_key_t item;
  ferry_property_key_t id, owner, name, complexity;
  const char *user_id;
};

static void open_device(struct device *d, const char *url, const char *dir, const char *email, int reg) {
  mkdir(dir, 0700);
  ferry_app_options_t o;
  check(ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION), "options");
  o.app_id = "item-app-seeds";
  o.base_url = url;
  o.base_directory = dir;
  o.log_level = FERRY_LOG_OFF;
  check(ferry_app_new(&d->app, &o), "app");
  if (reg) {
    struct waiter w;
    waiter_init(&w);
    check(ferry_app_register_email(d->app, email, "correct horse battery", on_status, &w), "register");
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
  }
  struct waiter w;
  waiter_init(&w);
  ferry_credentials_t c = {.kind = FERRY_CREDENTIALS_EMAIL_PASSWORD, .email = email, .password = "correct horse battery"};
  check(ferry_app_log_in(d->app, &c, on_user, &w), "log in");
  wait_done(&w, "login");
  d->user = w.user;
  check(ferry_user_id(&d->user_id, d->user), "user id");
  static const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_NORMAL, NULL},
  };
  const ferry_class_info_t classes[] = {{"Item", props, 4, FERRY_CLASS_NORMAL}};
  ferry_schema_t *schema = NULL;
  check(ferry_schema_new(&schema, classes, 1), "schema");
  char path[1024];
  snprintf(path, sizeof path, "%s/items.ferry", dir);
  ferry_sync_options_t so;
  check(ferry_sync_options_init(&so, FERRY_SYNC_OPTIONS_VERSION), "sync options");
  so.path = path;
  so.schema = schema;
  check(ferry_sync_open(&d->session, &d->db, d->user, &so), "sync open");
  ferry_schema_free(schema);
  check(ferry_db_find_class(&d->item, d->db, "Item"), "Item");
  check(ferry_db_find_property(&d->id, d->db, d->item, "_id"), "_id");
  check(ferry_db_find_property(&d->owner, d->db, d->item, "ownerId"), "ownerId");
  check(ferry_db_find_property(&d->name, d->db, d->item, "itemName"), "itemName");
  check(ferry_db_find_property(&d->complexity, d->db, d->item, "complexity"), "complexity");
}

static void subscribe(struct device *d) {
  ferry_subscription_set_t *set = NULL;
  check(ferry_sync_subscriptions(&set, d->session), "subscriptions");
  check(ferry_subscription_set_add(set, "simple-items", "Item", "complexity <= 4"), "add");
  uint64_t v = 0;
  check(ferry_sync_update_subscriptions(&v, d->session, set), "update");
  ferry_subscription_set_free(set);
  struct waiter w;
  waiter_init(&w);
  check(ferry_sync_wait_for_subscriptions(d->session, v, on_status, &w), "wait subscriptions");
  wait_done(&w, "subscription");
}

static void close_device(struct device *d) {
  ferry_sync_session_free(d->session);
  ferry_db_free(d->db);
  ferry_user_free(d->user);
  ferry_app_free(d->app);
}

static void create_item(struct device *d, int64_t n) {
  ferry_value_t id;
  check(ferry_object_id_generate(&id), "id");
  char name[32];
  int len = snprintf(name, sizeof name, "item %" PRId64, n);
  ferry_property_value_t v[] = {
      {d->id, id},
      {d->owner, {.type = FERRY_TYPE_STRING, .u.string = {d->user_id, strlen(d->user_id)}}},
      {d->name, {.type = FERRY_TYPE_STRING, .u.string = {name, (size_t)len}}},
      {d->complexity, {.type = FERRY_TYPE_INT, .u.i = n % 5}},
  };
  check(ferry_object_create(d->db, d->item, v, 4), "create");
}

static long peak_rss_mb(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

/* CPU seconds of this process so far, all threads: bench/run sets it beside the servers' and
 * the database's to tell where the time of a run went on a machine with few cores. */
static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* ---- latency: B's notification --------------------------------------------------------- */

struct seen {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long calls;
  double at;
};

static void on_change(void *u, const ferry_change_set_t *c) {
  struct seen *s = u;
  if (c->inserted_count == 0) return;
  double t = now();
  pthread_mutex_lock(&s->mu);
  s->calls++;
  s->at = t;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: sync BASE_URL DIR EMAIL upload N | bootstrap | latency N [BASE_URL_B]\n");
    return 2;
  }
  const char *url = argv[1], *dir = argv[2], *email = argv[3], *mode = argv[4];
  long n = argc > 5 ? atol(argv[5]) : 0;
  char a_dir[1024], b_dir[1024];
  snprintf(a_dir, sizeof a_dir, "%s/%s-a", dir, mode);
  snprintf(b_dir, sizeof b_dir, "%s/%s-b", dir, mode);
  if (strcmp(mode, "upload") == 0) {
    struct device a;
    open_device(&a, url, a_dir, email, 1);
    subscribe(&a);
    double t0 = now();
    for (long i = 0; i < n; i += 10000) {
      check(ferry_db_begin_write(a.db), "begin");
      for (long j = i; j < i + 10000 && j < n; j++) create_item(&a, j);
      check(ferry_db_commit(a.db), "commit");
    }
    double written = now();
    struct waiter w;
    waiter_init(&w);
    check(ferry_sync_wait_for_upload(a.session, on_status, &w), "wait upload");
    wait_done(&w, "upload");
    double t1 = now();
    printf("upload: %ld items in %.2f s (local writes %.2f s) = %.0f rows/s to durable acknowledgement; client peak RSS %ld MB\n",
           n, t1 - t0, written - t0, n / (t1 - t0), peak_rss_mb());
    printf("RESULT upload_rows_per_s=%.0f upload_s=%.3f local_writes_s=%.3f client_peak_rss_mb=%ld client_cpu_s=%.2f\n",
           n / (t1 - t0), t1 - t0, written - t0, peak_rss_mb(), cpu_seconds());
    close_device(&a);
  } else if (strcmp(mode, "bootstrap") == 0) {
    struct device b;
    open_device(&b, url, b_dir, email, 0);
    double t0 = now();
    subscribe(&b);
    double t1 = now();
    long peak = peak_rss_mb(); /* before the count below, which materialises every row */
    ferry_results_t *r = NULL;
    size_t count = 0;
    check(ferry_db_query(&r, b.db, b.item, "TRUEPREDICATE", NULL, 0), "query");
    check(ferry_results_count(&count, r), "count");
    ferry_results_free(r);
    printf("bootstrap: %zu items in %.2f s = %.0f rows/s; client peak RSS %ld MB\n", count, t1 - t0, count / (t1 - t0), peak);
    printf("RESULT bootstrap_rows_per_s=%.0f bootstrap_rows=%zu bootstrap_s=%.3f client_peak_rss_mb=%ld client_cpu_s=%.2f\n",
           count / (t1 - t0), count, t1 - t0, peak, cpu_seconds());
    close_device(&b);
  } else if (strcmp(mode, "latency") == 0) {
    /* B on another node measures the fan-out between nodes (the database's notification) on
     * top of one node's; the user registered through A's node is known to B's by the shared
     * database. */
    const char *url_b = argc > 6 ? argv[6] : url;
    struct device a, b;
    open_device(&a, url, a_dir, email, 1);
    open_device(&b, url_b, b_dir, email, 0);
    subscribe(&a);
    subscribe(&b);
    struct seen s = {.calls = 0};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    ferry_notification_token_t *token = NULL;
    check(ferry_db_observe_query(&token, b.db, b.item, "complexity <= 4", NULL, 0, on_change, &s, NULL), "observe");
    double *lat = calloc((size_t)n, sizeof *lat);
    for (long i = 0; i < n; i++) {
      double t0 = now();
      check(ferry_db_begin_write(a.db), "begin");
      create_item(&a, i);
      check(ferry_db_commit(a.db), "commit");
      pthread_mutex_lock(&s.mu);
      while (s.calls <= i) pthread_cond_wait(&s.cv, &s.mu);
      lat[i] = s.at - t0;
      pthread_mutex_unlock(&s.mu);
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    printf("latency: %ld writes, device A commit -> device B notification%s: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", n,
           url_b == url ? "" : " (B on another node)", lat[n / 2] * 1e3, lat[(n * 99) / 100] * 1e3, lat[n - 1] * 1e3);
    printf("RESULT latency_p50_ms=%.3f latency_p99_ms=%.3f latency_max_ms=%.3f writes=%ld\n", lat[n / 2] * 1e3,
           lat[(n * 99) / 100] * 1e3, lat[n - 1] * 1e3, n);
    free(lat);
    ferry_notification_token_free(token);
    close_device(&a);
    close_device(&b);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
