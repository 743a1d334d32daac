/*
 * workload.c — the fixed small workloads whose instructions bench/budgets/run counts with
 * callgrind (see bench/budgets/README.md). Each measured mode turns callgrind's instrumentation
 * on around exactly the work it measures, in every thread (CALLGRIND_START_INSTRUMENTATION and
 * CALLGRIND_STOP_INSTRUMENTATION; run with --instr-atstart=no)
 * and prints `UNITS n`, the number of objects (or seconds) that work covered. Outside
 * valgrind the macros do nothing, so every mode also runs natively.
 *
 *   workload insert DIR N                      N objects created locally (C API, with history),
 *                                              in transactions of 500
 *   workload upload URL DIR EMAIL N            registers EMAIL ("-": an anonymous user), prints
 *                                              READY, reads a line, then writes N objects in one
 *                                              transaction and waits for their durable
 *                                              acknowledgement (nothing measured here: the
 *                                              script counts the server's work meanwhile)
 *   workload bootstrap URL DIR EMAIL           a fresh device of EMAIL subscribes and downloads
 *                                              every object (measured: the subscription's wait)
 *   workload follow URL DIR EMAIL N            a subscribed device prints READY, then integrates
 *                                              N objects another device writes, printing GOT
 *                                              for each (measured: from READY until it has them)
 *   workload write URL DIR EMAIL N             writes N objects, one per transaction, each after
 *                                              a line on stdin (in lockstep with follow's GOTs),
 *                                              and waits for their acknowledgement
 *   workload idle URL DIR EMAIL K SECONDS      K synced databases open and subscribed, then
 *                                              SECONDS of nothing (measured: the idle time)
 */
#define _GNU_SOURCE 1
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define BENCH_NAME "workload"
#include "../bench_waiter.h"

static ferry_schema_t *item_schema(void) {
  static const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_NORMAL, NULL},
  };
  static const ferry_class_info_t classes[] = {{"Item", props, 4, FERRY_CLASS_NORMAL}};
  ferry_schema_t *schema = NULL;
  check(ferry_schema_new(&schema, classes, 1), "schema");
  return schema;
}

struct items {
  ferry_db_t *db;
  ferry_class_key_t item;
  ferry_property_key_t id, owner, name, complexity;
};

static void find_items(struct items *t, ferry_db_t *db) {
  t->db = db;
  check(ferry_db_find_class(&t->item, db, "Item"), "Item");
  check(ferry_db_find_property(&t->id, db, t->item, "_id"), "_id");
  check(ferry_db_find_property(&t->owner, db, t->item, "ownerId"), "ownerId");
  check(ferry_db_find_property(&t->name, db, t->item, "itemName"), "itemName");
  check(ferry_db_find_property(&t->complexity, db, t->item, "complexity"), "complexity");
}

static void create_item(struct items *t, const ferry_value_t *id, const char *owner, int64_t n) {
  char name[32];
  int len = snprintf(name, sizeof name, "item-%" PRId64, n);
  ferry_property_value_t v[] = {
      {t->id, *id},
      {t->owner, {.type = FERRY_TYPE_STRING, .u.string = {owner, strlen(owner)}}},
      {t->name, {.type = FERRY_TYPE_STRING, .u.string = {name, (size_t)len}}},
      {t->complexity, {.type = FERRY_TYPE_INT, .u.i = n % 5}},
  };
  check(ferry_object_create(t->db, t->item, v, 4), "create");
}

static size_t count_items(struct items *t) {
  ferry_results_t *r = NULL;
  size_t count = 0;
  check(ferry_db_query(&r, t->db, t->item, "TRUEPREDICATE", NULL, 0), "query");
  check(ferry_results_count(&count, r), "count");
  ferry_results_free(r);
  return count;
}

/* ---- devices ------------------------------------------------------------------------------- */

struct device {
  ferry_app_t *app;
  ferry_user_t *user;
  const char *user_id;
  ferry_sync_session_t *session;
  struct items items;
};

static void log_in(struct device *d, const char *url, const char *dir, const char *email, int reg) {
  mkdir(dir, 0700);
  ferry_app_options_t o;
  check(ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION), "options");
  o.app_id = "item-app-seeds";
  o.base_url = url;
  o.base_directory = dir;
  o.log_level = FERRY_LOG_OFF;
  check(ferry_app_new(&d->app, &o), "app");
  if (strcmp(email, "-") == 0) {
    /* Anonymous: no password to hash (the server's budget run is under valgrind). */
    struct waiter w;
    waiter_init(&w);
    ferry_credentials_t c = {.kind = FERRY_CREDENTIALS_ANONYMOUS};
    check(ferry_app_log_in(d->app, &c, on_user, &w), "log in");
    wait_done(&w, "login");
    d->user = w.user;
    check(ferry_user_id(&d->user_id, d->user), "user id");
    return;
  }
  if (reg) {
    struct waiter w;
    waiter_init(&w);
    check(ferry_app_register_email(d->app, email, "correct horse battery", on_status, &w), "register");
    wait_done(&w, "register");
  }
  struct waiter w;
  waiter_init(&w);
  ferry_credentials_t c = {.kind = FERRY_CREDENTIALS_EMAIL_PASSWORD, .email = email, .password = "correct horse battery"};
  check(ferry_app_log_in(d->app, &c, on_user, &w), "log in");
  wait_done(&w, "login");
  d->user = w.user;
  check(ferry_user_id(&d->user_id, d->user), "user id");
}

static void open_synced(struct device *d, const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ferry_schema_t *schema = item_schema();
  ferry_sync_options_t so;
  check(ferry_sync_options_init(&so, FERRY_SYNC_OPTIONS_VERSION), "sync options");
  so.path = path;
  so.schema = schema;
  ferry_db_t *db = NULL;
  check(ferry_sync_open(&d->session, &db, d->user, &so), "sync open");
  ferry_schema_free(schema);
  find_items(&d->items, db);
}

/* Subscribes to every Item and waits until the set is complete. */
static void subscribe(ferry_sync_session_t *session) {
  ferry_subscription_set_t *set = NULL;
  check(ferry_sync_subscriptions(&set, session), "subscriptions");
  check(ferry_subscription_set_add(set, "all-items", "Item", "complexity >= 0"), "add");
  uint64_t v = 0;
  check(ferry_sync_update_subscriptions(&v, session, set), "update");
  ferry_subscription_set_free(set);
  struct waiter w;
  waiter_init(&w);
  check(ferry_sync_wait_for_subscriptions(session, v, on_status, &w), "wait subscriptions");
  wait_done(&w, "subscription");
}

static void wait_upload(ferry_sync_session_t *session) {
  struct waiter w;
  waiter_init(&w);
  check(ferry_sync_wait_for_upload(session, on_status, &w), "wait upload");
  wait_done(&w, "upload");
}

static void close_device(struct device *d) {
  ferry_sync_session_free(d->session);
  ferry_db_free(d->items.db);
  ferry_user_free(d->user);
  ferry_app_free(d->app);
}

/* ---- follow: a count of inserted objects, told by the query observer ------------------------ */

struct seen {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t inserted;
};

static void on_change(void *u, const ferry_change_set_t *c) {
  struct seen *s = u;
  /* Tells the writer (through bench/budgets/run) to write the next one. */
  if (c->inserted_count) {
    printf("GOT %zu\n", c->inserted_count);
    fflush(stdout);
  }
  pthread_mutex_lock(&s->mu);
  s->inserted += c->inserted_count;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* ---- modes ---------------------------------------------------------------------------------- */

static void insert(const char *dir, long n) {
  mkdir(dir, 0700);
  char path[1024];
  snprintf(path, sizeof path, "%s/insert.ferry", dir);
  ferry_schema_t *schema = item_schema();
  ferry_db_options_t o;
  check(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION), "db options");
  o.path = path;
  o.schema = schema;
  ferry_db_t *db = NULL;
  check(ferry_db_open(&db, &o), "open");
  ferry_schema_free(schema);
  struct items t;
  find_items(&t, db);
  ferry_value_t *ids = calloc((size_t)n, sizeof *ids);
  for (long i = 0; i < n; i++) check(ferry_object_id_generate(&ids[i]), "id");
  CALLGRIND_START_INSTRUMENTATION;
  for (long i = 0; i < n; i += 500) {
    check(ferry_db_begin_write(db), "begin");
    for (long j = i; j < i + 500 && j < n; j++) create_item(&t, &ids[j], "user-07", j);
    check(ferry_db_commit(db), "commit");
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  free(ids);
  check(ferry_db_close(db), "close");
  ferry_db_free(db);
  printf("UNITS %ld\n", n);
}

/* lockstep: read a line from stdin before each transaction (follow's writer: one changeset
 * per download, whatever the timing). */
static void write_items(struct device *d, long n, long per_transaction, int lockstep) {
  char line[64];
  for (long i = 0; i < n; i += per_transaction) {
    if (lockstep && !fgets(line, sizeof line, stdin)) {
      fprintf(stderr, "workload: the lockstep input ended\n");
      exit(1);
    }
    check(ferry_db_begin_write(d->items.db), "begin");
    for (long j = i; j < i + per_transaction && j < n; j++) {
      ferry_value_t id;
      check(ferry_object_id_generate(&id), "id");
      create_item(&d->items, &id, d->user_id, j);
    }
    check(ferry_db_commit(d->items.db), "commit");
  }
  wait_upload(d->session);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "insert") == 0 && argc == 4) {
    insert(argv[2], atol(argv[3]));
    return 0;
  }
  if (argc < 5) {
    fprintf(stderr, "usage: workload insert DIR N | upload|follow|write URL DIR EMAIL N | bootstrap URL DIR EMAIL"
                    " | idle URL DIR EMAIL K SECONDS\n");
    return 2;
  }
  const char *url = argv[2], *dir = argv[3], *email = argv[4];
  long n = argc > 5 ? atol(argv[5]) : 0;
  struct device d;
  if (strcmp(mode, "upload") == 0) {
    log_in(&d, url, dir, email, 1);
    open_synced(&d, dir, "items.ferry");
    subscribe(d.session);
    printf("READY\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) {
      fprintf(stderr, "workload: no go-ahead on stdin\n");
      return 1;
    }
    write_items(&d, n, n, 0);
    printf("UNITS %ld\n", n);
  } else if (strcmp(mode, "write") == 0) {
    log_in(&d, url, dir, email, 0);
    open_synced(&d, dir, "items.ferry");
    subscribe(d.session);
    write_items(&d, n, 1, 1);
    printf("UNITS %ld\n", n);
  } else if (strcmp(mode, "bootstrap") == 0) {
    log_in(&d, url, dir, email, 0);
    open_synced(&d, dir, "items.ferry");
    CALLGRIND_START_INSTRUMENTATION;
    subscribe(d.session);
    CALLGRIND_STOP_INSTRUMENTATION;
    printf("UNITS %zu\n", count_items(&d.items));
  } else if (strcmp(mode, "follow") == 0) {
    log_in(&d, url, dir, email, 0);
    open_synced(&d, dir, "items.ferry");
    subscribe(d.session);
    struct seen s = {.inserted = 0};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    ferry_notification_token_t *token = NULL;
    check(ferry_db_observe_query(&token, d.items.db, d.items.item, "complexity >= 0", NULL, 0, on_change, &s, NULL), "observe");
    /* Called after commits only: it counts what arrives from here on. */
    CALLGRIND_START_INSTRUMENTATION;
    printf("READY\n");
    fflush(stdout);
    pthread_mutex_lock(&s.mu);
    while (s.inserted < (size_t)n) pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    CALLGRIND_STOP_INSTRUMENTATION;
    ferry_notification_token_free(token);
    printf("UNITS %ld\n", n);
  } else if (strcmp(mode, "idle") == 0 && argc == 7) {
    long k = n, seconds = atol(argv[6]);
    log_in(&d, url, dir, email, 0);
    ferry_sync_session_t **sessions = calloc((size_t)k, sizeof *sessions);
    ferry_db_t **dbs = calloc((size_t)k, sizeof *dbs);
    for (long i = 0; i < k; i++) {
      char name[64];
      snprintf(name, sizeof name, "idle-%ld.ferry", i);
      open_synced(&d, dir, name);
      subscribe(d.session);
      sessions[i] = d.session;
      dbs[i] = d.items.db;
    }
    CALLGRIND_START_INSTRUMENTATION;
    sleep((unsigned)seconds);
    CALLGRIND_STOP_INSTRUMENTATION;
    for (long i = 0; i < k; i++) {
      ferry_sync_session_free(sessions[i]);
      ferry_db_free(dbs[i]);
    }
    free(sessions);
    free(dbs);
    ferry_user_free(d.user);
    ferry_app_free(d.app);
    printf("UNITS %ld\n", seconds);
    return 0;
  } else {
    fprintf(stderr, "workload: unknown mode or arguments: %s\n", mode);
    return 2;
  }
  close_device(&d);
  return 0;
}
