/* device.c — see device.h. */
#define _GNU_SOURCE 1
#include "device.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "jwt.h"
#include "samples.h"

struct device_auth device_auth;

static atomic_long sync_errors, transient_errors, compensating_writes;
long sync_errors_seen(void) { return atomic_load(&sync_errors); }
long transient_errors_seen(void) { return atomic_load(&transient_errors); }
long compensating_writes_seen(void) { return atomic_load(&compensating_writes); }

/* A load run should see no sync error that stops a session or reverts a write; the server
 * may shed load with a transient one (try again: the device reconnects and loses nothing),
 * which is counted apart. The first few of each say why. */
static void on_sync_error(void *userdata, ferry_sync_session_t *session, const ferry_sync_error_t *e) {
  (void)userdata, (void)session;
  atomic_fetch_add(&compensating_writes, (long)e->compensating_writes_count);
  int transient = !e->is_fatal && e->compensating_writes_count == 0 && e->action == FERRY_SYNC_ACTION_TRANSIENT;
  long n = atomic_fetch_add(transient ? &transient_errors : &sync_errors, 1);
  if (n < 5)
    fprintf(stderr, "load: %s sync error %d (%s): %s\n", transient ? "transient" : "a", e->code, e->is_fatal ? "fatal" : "not fatal",
            e->message);
}

static atomic_long log_lines;
static void on_log(void *userdata, int32_t level, const char *message) {
  (void)userdata, (void)level;
  if (atomic_fetch_add(&log_lines, 1) < 20) fprintf(stderr, "load: ferry: %s\n", message);
}

ferry_app_t *load_app_new(const char *url, const char *dir) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "load: mkdir %s: %s\n", dir, strerror(errno));
    return NULL;
  }
  ferry_app_options_t o;
  ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION);
  o.app_id = "item-app-seeds";
  o.base_url = url;
  o.base_directory = dir;
  o.log_level = FERRY_LOG_ERROR;
  o.log_callback = on_log;
  o.multiplex_sessions = false;
  ferry_app_t *app = NULL;
  if (ferry_app_new(&app, &o) != FERRY_OK) {
    fprintf(stderr, "load: app on %s: %s\n", url, ferry_error_last()->message);
    return NULL;
  }
  ferry_app_set_sync_error_handler(app, on_sync_error, NULL, NULL);
  return app;
}

void device_init(struct device *d, ferry_app_t *app, const char *subject, const char *path) {
  memset(d, 0, sizeof *d);
  d->app = app;
  snprintf(d->subject, sizeof d->subject, "%s", subject);
  snprintf(d->path, sizeof d->path, "%s", path);
}

/* ---- blocking waits on one completion ----------------------------------------------------- */

struct one {
  struct latch latch;
  ferry_user_t *user;
};

static void on_status(void *u, const ferry_error_t *e) { latch_done(&((struct one *)u)->latch, e); }
static void on_user(void *u, ferry_user_t *user, const ferry_error_t *e) {
  ((struct one *)u)->user = user;
  latch_done(&((struct one *)u)->latch, e);
}

/* Logins wait at most this long: the App's own request timeout is 60 s. */
#define LOGIN_TIMEOUT_US (120u * 1000000u)

static struct one *one_new(void) {
  struct one *w = calloc(1, sizeof *w);
  latch_init(&w->latch, 1);
  return w;
}

/* Waits for w and frees it; a wait that times out leaks w, which its late callback may
 * still use. Quiet when what is NULL. */
static int wait_one(struct one *w, const char *what, const char *subject) {
  if (latch_wait(&w->latch, now_us() + LOGIN_TIMEOUT_US) != 0) {
    if (what) fprintf(stderr, "load: %s of %s: no answer within %u s\n", what, subject, LOGIN_TIMEOUT_US / 1000000u);
    return -1;
  }
  int failed = w->latch.failed != 0;
  if (failed && what) fprintf(stderr, "load: %s of %s failed: %s\n", what, subject, w->latch.first_error);
  free(w);
  return failed ? -1 : 0;
}

int device_log_in(struct device *d) {
  d->login_start_us = now_us();
  ferry_credentials_t c = {0};
  char token[1024], email[96];
  if (device_auth.password) {
    snprintf(email, sizeof email, "%s@load.example", d->subject);
    /* Registering an email that exists fails (409): a device of a user another device
     * registered just logs in. */
    struct one *r = one_new();
    if (ferry_app_register_email(d->app, email, "load-password", on_status, r) == FERRY_OK) wait_one(r, NULL, d->subject);
    else free(r);
    c.kind = FERRY_CREDENTIALS_EMAIL_PASSWORD;
    c.email = email;
    c.password = "load-password";
  } else {
    if (jwt_sign_hs256(token, sizeof token, d->subject, device_auth.audience, device_auth.jwt_key) != 0) {
      fprintf(stderr, "load: cannot sign a token for %s\n", d->subject);
      return -1;
    }
    c.kind = FERRY_CREDENTIALS_JWT;
    c.token = token;
  }
  struct one *w = one_new();
  if (ferry_app_log_in(d->app, &c, on_user, w) != FERRY_OK) {
    fprintf(stderr, "load: log in %s: %s\n", d->subject, ferry_error_last()->message);
    free(w);
    return -1;
  }
  /* The callback stores the user before it counts the latch down, under the latch's lock. */
  if (latch_wait(&w->latch, now_us() + LOGIN_TIMEOUT_US) == 0) d->user = w->user;
  if (wait_one(w, "login", d->subject) != 0) return -1;
  d->login_end_us = now_us();
  samples_add(SAMPLE_LOGIN, d->login_start_us, d->login_end_us);
  return ferry_user_id(&d->user_id, d->user) == FERRY_OK ? 0 : -1;
}

int device_open(struct device *d) {
  ferry_schema_t *schema = item_schema();
  if (!schema) return -1;
  ferry_sync_options_t so;
  ferry_sync_options_init(&so, FERRY_SYNC_OPTIONS_VERSION);
  so.path = d->path;
  so.schema = schema;
  int rc = ferry_sync_open(&d->session, &d->db, d->user, &so);
  ferry_schema_free(schema);
  if (rc != FERRY_OK) {
    fprintf(stderr, "load: open %s for %s: %s\n", d->path, d->subject, ferry_error_last()->message);
    return -1;
  }
  return item_keys_find(&d->keys, d->db);
}

static void on_subscribed(void *u, const ferry_error_t *e) {
  struct device *d = u;
  d->subscribed_us = now_us();
  if (!e) samples_add(SAMPLE_CONNECT, d->login_start_us, d->subscribed_us);
  latch_done(d->subscribed, e);
}

int device_subscribe(struct device *d, struct latch *subscribed) {
  char query[160];
  snprintf(query, sizeof query, "ownerId == \"%s\"", d->user_id);
  ferry_subscription_set_t *set = NULL;
  uint64_t version = 0;
  if (ferry_sync_subscriptions(&set, d->session) != FERRY_OK || ferry_subscription_set_add(set, "items", "Item", query) != FERRY_OK ||
      ferry_sync_update_subscriptions(&version, d->session, set) != FERRY_OK) {
    fprintf(stderr, "load: subscribe %s: %s\n", d->subject, ferry_error_last()->message);
    ferry_subscription_set_free(set);
    return -1;
  }
  ferry_subscription_set_free(set);
  d->subscribed = subscribed;
  if (ferry_sync_wait_for_subscriptions(d->session, version, on_subscribed, d) != FERRY_OK) {
    fprintf(stderr, "load: wait for the subscription of %s: %s\n", d->subject, ferry_error_last()->message);
    return -1;
  }
  return 0;
}

void device_close(struct device *d) {
  ferry_sync_session_free(d->session);
  ferry_db_free(d->db);
  ferry_user_free(d->user);
  d->session = NULL, d->db = NULL, d->user = NULL;
}

/* ---- many devices at once ---------------------------------------------------------------- */

struct connect_job {
  struct device **devices;
  size_t n;
  atomic_size_t next;
  atomic_long failed;
  struct latch subscribed;
};

/* Each thread takes the next device: a login is a round trip (and on the server a database
 * write), so `parallel` of them are in flight; subscriptions are only waited for at the end. */
static void *connect_thread(void *u) {
  struct connect_job *j = u;
  for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
    struct device *d = j->devices[i];
    if (device_log_in(d) != 0 || device_open(d) != 0 || device_subscribe(d, &j->subscribed) != 0) {
      atomic_fetch_add(&j->failed, 1);
      latch_done(&j->subscribed, NULL);
    }
  }
  return NULL;
}

long devices_connect(struct device **devices, size_t n, int parallel, uint64_t deadline_us) {
  /* On the heap: after a missed deadline late completions may still arrive, so then it is
   * never freed. */
  struct connect_job *j = calloc(1, sizeof *j);
  j->devices = devices, j->n = n;
  latch_init(&j->subscribed, (long)n);
  if (parallel < 1) parallel = 1;
  if ((size_t)parallel > n) parallel = (int)(n ? n : 1);
  pthread_t *threads = calloc((size_t)parallel, sizeof *threads);
  for (int t = 0; t < parallel; t++) pthread_create(&threads[t], NULL, connect_thread, j);
  for (int t = 0; t < parallel; t++) pthread_join(threads[t], NULL);
  free(threads);
  long late = 0;
  if (latch_wait(&j->subscribed, deadline_us) != 0) {
    pthread_mutex_lock(&j->subscribed.mu);
    late = j->subscribed.pending;
    pthread_mutex_unlock(&j->subscribed.mu);
    fprintf(stderr, "load: %ld subscriptions not complete by the deadline\n", late);
  }
  if (j->subscribed.failed)
    fprintf(stderr, "load: %ld subscriptions failed; the first: %s\n", j->subscribed.failed, j->subscribed.first_error);
  long bad = atomic_load(&j->failed) + j->subscribed.failed + late;
  if (!late) free(j);
  return bad;
}
