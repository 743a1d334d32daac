/*
 * sync_waiters.h — what test_sync.c and test_sync_session.c share: waiting for completions,
 * and the seeds' app, its Item schema, users and devices.
 *
 * Completion callbacks (log in, register, upload / download / subscription waits, log out,
 * ferry_sync_open_async) run on Ferry's loop thread, not the test's: each call gets a heap
 * `struct waiter` as userdata, and the test waits on its condition variable with a deadline
 * (WAIT_SECONDS), never with a sleep. A completion that never came may still come after the
 * test gave up on it, so a waiter that timed out is leaked, never freed under the callback.
 * finish() turns a call and its completion into one `struct outcome` and checks the completion
 * ran exactly once (and, when the test called note_main_thread(), not on the host's thread).
 *
 * Everything here is static inline (or marked unused): a test that does not use a helper still
 * builds with -Werror.
 */
#ifndef FERRY_TEST_SYNC_WAITERS_H
#define FERRY_TEST_SYNC_WAITERS_H

#include "check.h"

#include <pthread.h>

#define WAIT_SECONDS 60 /* generous: valgrind is slow; a passing run never waits this long */
#define APP_ID "item-app-seeds"

/* ---- time and threads ----------------------------------------------------------------------- */

/* The host's main thread, once the test recorded it with note_main_thread(). */
static pthread_t main_thread __attribute__((unused));
static bool main_thread_known __attribute__((unused)) = false;

static inline void note_main_thread(void) {
  main_thread = pthread_self();
  main_thread_known = true;
}

/* Whether the caller runs on the recorded main thread (false when none was recorded). */
static inline bool on_main_thread_now(void) {
  return main_thread_known && pthread_equal(pthread_self(), main_thread);
}

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A counter that callbacks update under mu, read under mu. */
static inline int locked_int(pthread_mutex_t *mu, const int *value) {
  pthread_mutex_lock(mu);
  int n = *value;
  pthread_mutex_unlock(mu);
  return n;
}

/* CLOCK_MONOTONIC, `seconds` from now: a deadline for pthread_cond_timedwait. */
static inline struct timespec deadline_in(double seconds) {
  struct timespec d;
  clock_gettime(CLOCK_MONOTONIC, &d);
  long long ns = (long long)d.tv_nsec + (long long)((seconds - (double)(long long)seconds) * 1e9);
  d.tv_sec += (time_t)seconds + (time_t)(ns / 1000000000LL);
  d.tv_nsec = (long)(ns % 1000000000LL);
  return d;
}

/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines (deadline_in). */
static inline void cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

/* ---- waiting for completions ----------------------------------------------------------------- */

/* One completion: allocated on the heap, because a completion that never came may still come
 * after the test gave up on it (the waiter is then leaked, never freed under the callback). */
struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int code;
  char message[1024];
  ferry_user_t *user;
  bool user_and_error; /* both a user and an error: a contract violation */
  /* ferry_sync_open_async */
  ferry_sync_session_t *session;
  ferry_db_t *db;
  bool handles_and_error; /* handles together with an error, or neither without one */
  bool on_main_thread;
  int found_in_callback; /* ferry_object_get of `probe` inside the open completion */
  ferry_value_t probe;
};

static inline struct waiter *waiter_new(void) {
  struct waiter *w = calloc(1, sizeof *w);
  CHECK(w != NULL);
  pthread_mutex_init(&w->mu, NULL);
  cond_init_monotonic(&w->cv);
  w->code = -9999;
  w->found_in_callback = -9999;
  w->probe = v_null();
  return w;
}

static inline void waiter_free(struct waiter *w) {
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

static inline void record(struct waiter *w, const ferry_error_t *e) {
  w->code = e ? e->code : FERRY_OK;
  snprintf(w->message, sizeof w->message, "%s", e ? (e->message ? e->message : "(NULL message)") : "");
  if (on_main_thread_now()) w->on_main_thread = true;
}

static inline void on_status(void *userdata, const ferry_error_t *error) {
  struct waiter *w = userdata;
  pthread_mutex_lock(&w->mu);
  record(w, error);
  w->calls++;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static inline void on_user(void *userdata, ferry_user_t *user, const ferry_error_t *error) {
  struct waiter *w = userdata;
  pthread_mutex_lock(&w->mu);
  record(w, error);
  if (user && error) w->user_and_error = true;
  if (w->user) ferry_user_free(w->user); /* a second call: counted, not leaked */
  w->user = user;
  w->calls++;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static inline void on_open(void *userdata, ferry_sync_session_t *session, ferry_db_t *db, const ferry_error_t *error) {
  struct waiter *w = userdata;
  pthread_mutex_lock(&w->mu);
  record(w, error);
  if ((error != NULL) != (session == NULL) || (error != NULL) != (db == NULL)) w->handles_and_error = true;
  if (db != NULL && w->probe.type != FERRY_TYPE_NULL) {
    /* the data are there when the completion runs */
    ferry_object_t *o = NULL;
    w->found_in_callback = ferry_object_get(&o, db, 0, &w->probe);
    ferry_object_free(o);
  }
  if (w->calls == 0) {
    w->session = session;
    w->db = db;
  } else { /* a second call: counted, its handles freed */
    ferry_sync_session_free(session);
    ferry_db_free(db);
  }
  w->calls++;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* Waits for the completion; false on timeout (then the waiter must be leaked). */
static inline bool waiter_wait_for(struct waiter *w, double seconds) {
  struct timespec deadline = deadline_in(seconds);
  pthread_mutex_lock(&w->mu);
  while (w->calls == 0)
    if (pthread_cond_timedwait(&w->cv, &w->mu, &deadline) == ETIMEDOUT) break;
  bool done = w->calls > 0;
  pthread_mutex_unlock(&w->mu);
  return done;
}

static inline bool waiter_wait(struct waiter *w) { return waiter_wait_for(w, WAIT_SECONDS); }

static inline int waiter_calls(struct waiter *w) { return locked_int(&w->mu, &w->calls); }

/* The outcome of an asynchronous call: the call's own code if it failed (no callback then),
 * else the completion's code, or -9999 on timeout. */
struct outcome {
  int code;
  char message[1024];
};

static inline struct outcome finish(int call_rc, struct waiter *w, const char *what) {
  struct outcome o = {call_rc, ""};
  if (call_rc != FERRY_OK) {
    snprintf(o.message, sizeof o.message, "%s", ferry_error_last()->message);
    waiter_free(w); /* a failing call never calls back */
    return o;
  }
  if (!waiter_wait(w)) {
    CHECKF(false, "%s: no completion within %d s", what, WAIT_SECONDS);
    o.code = -9999;
    return o; /* w leaked on purpose */
  }
  pthread_mutex_lock(&w->mu);
  o.code = w->code;
  snprintf(o.message, sizeof o.message, "%s", w->message);
  CHECKF(w->calls == 1, "%s: completion called %d times", what, w->calls);
  if (main_thread_known)
    CHECKF(!w->on_main_thread, "%s: the completion ran on the host's thread, not the loop thread", what);
  pthread_mutex_unlock(&w->mu);
  waiter_free(w);
  return o;
}

#define CHECK_OUTCOME_OK(o, what)                                                            \
  do {                                                                                     \
    struct outcome co_ = (o);                                                              \
    CHECKF(co_.code == FERRY_OK, "%s: %d (%s) %s", what, co_.code, ferry_strerror(co_.code), \
           co_.message);                                                                   \
  } while (0)

/* ---- items ------------------------------------------------------------------------------------ */

static ferry_schema_t *item_schema;

static inline void make_item_schema(void) {
  static const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, 0, NULL},
      {"itemName", FERRY_TYPE_STRING, 0, NULL},
      {"complexity", FERRY_TYPE_INT, 0, NULL},
  };
  ferry_class_info_t cls = {"Item", props, 4, 0};
  CHECK_OK(ferry_schema_new(&item_schema, &cls, 1));
}

enum { P_ID = 0, P_OWNER = 1, P_NAME = 2, P_COMPLEXITY = 3 };

/* An ObjectId as the 24 hex digits the server's messages use. */
static inline void oid_hex(char out[25], const ferry_value_t *v) {
  for (int i = 0; i < 12; i++) snprintf(out + 2 * i, 3, "%02x", v->u.object_id[i]);
}

static inline ferry_value_t new_oid(void) {
  ferry_value_t v;
  CHECK_OK(ferry_object_id_generate(&v));
  return v;
}

static inline size_t count_items(ferry_db_t *db) {
  ferry_results_t *r = NULL;
  CHECK_OK(ferry_db_query(&r, db, 0, "TRUEPREDICATE", NULL, 0));
  size_t n = 0;
  CHECK_OK(ferry_results_count(&n, r));
  ferry_results_free(r);
  return n;
}

/* ---- users ------------------------------------------------------------------------------------ */

static const ferry_credentials_t anonymous __attribute__((unused)) = {FERRY_CREDENTIALS_ANONYMOUS, NULL, NULL, NULL};

static inline ferry_credentials_t email_credentials(const char *email, const char *password) {
  ferry_credentials_t c = {FERRY_CREDENTIALS_EMAIL_PASSWORD, email, password, NULL};
  return c;
}

static inline void random_email(char *out, size_t size, const char *who) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(out, size, "%s-%d-%ld%09ld@example.com", who, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
}

/* Logs in; on success *out_user receives the user (exactly when the completion reports OK). */
static inline struct outcome log_in(ferry_app_t *app, const ferry_credentials_t *c, ferry_user_t **out_user) {
  struct waiter *w = waiter_new();
  int rc = ferry_app_log_in(app, c, on_user, w);
  if (rc == FERRY_OK && waiter_wait(w)) {
    pthread_mutex_lock(&w->mu);
    CHECKF(!w->user_and_error, "login completion got both a user and an error");
    CHECKF((w->code == FERRY_OK) == (w->user != NULL), "login completion: code %d with user %p",
           w->code, (void *)w->user);
    *out_user = w->user;
    w->user = NULL;
    pthread_mutex_unlock(&w->mu);
  }
  return finish(rc, w, "ferry_app_log_in");
}

static inline struct outcome register_email(ferry_app_t *app, const char *email, const char *password) {
  struct waiter *w = waiter_new();
  return finish(ferry_app_register_email(app, email, password, on_status, w), w, "ferry_app_register_email");
}

/* ---- apps, devices and sessions --------------------------------------------------------------- */

/* The options of an App of the seeds' app on `url`, based in `dir`; the rest as initialized. */
static inline ferry_app_options_t app_options(const char *dir, const char *url) {
  ferry_app_options_t o;
  CHECK_OK(ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION));
  o.app_id = APP_ID;
  o.base_url = url;
  o.base_directory = dir;
  o.log_level = FERRY_LOG_WARN;
  return o;
}

static inline ferry_app_t *app_new_with(const ferry_app_options_t *o) {
  ferry_app_t *app = NULL;
  CHECK_OK(ferry_app_new(&app, o));
  return app;
}

/* A new App on base directory `dir` talking to `url`, with the default test options. */
static inline ferry_app_t *app_on(const char *dir, const char *url) {
  ferry_app_options_t o = app_options(dir, url);
  return app_new_with(&o);
}

/* One device: an App with its own base directory, a user, a synced database. Each test defines
 * its own `struct error_log` (what its sync error handler records). */
struct error_log;

struct device {
  char dir[640];
  char db_path[700];
  ferry_app_t *app;
  ferry_user_t *user;
  const char *user_id; /* lent by user */
  ferry_sync_session_t *session;
  ferry_db_t *db;
  struct error_log *errors;
};

static int device_counter __attribute__((unused)) = 0;

/* Zeroes d and sets its base directory: `dir` (reused) when not NULL, else a new one in the
 * test's temporary directory, named after `name`; its database is items.ferry there. */
static inline void device_dirs(struct device *d, const char *name, const char *dir) {
  memset(d, 0, sizeof *d);
  if (dir != NULL) {
    snprintf(d->dir, sizeof d->dir, "%s", dir);
  } else {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "device-%d-%s", ++device_counter, name);
    snprintf(d->dir, sizeof d->dir, "%s", test_path(leaf));
    CHECKF(mkdir(d->dir, 0700) == 0, "mkdir %s: %s", d->dir, strerror(errno));
  }
  snprintf(d->db_path, sizeof d->db_path, "%s/items.ferry", d->dir);
}

/* Logs the device's App in with c (registering the email and password first when asked). */
static inline void device_login(struct device *d, ferry_credentials_t c, bool do_register) {
  if (do_register) CHECK_OUTCOME_OK(register_email(d->app, c.email, c.password), "register");
  CHECK_OUTCOME_OK(log_in(d->app, &c, &d->user), "log in");
  CHECK(d->user != NULL);
  CHECK_OK(ferry_user_id(&d->user_id, d->user));
}

/* Frees the device's session, database, user and App (any of them may be NULL). */
static inline void device_free_handles(struct device *d) {
  ferry_sync_session_free(d->session);
  ferry_db_free(d->db);
  ferry_user_free(d->user);
  ferry_app_free(d->app);
}

/* Sync options for the Item schema at `path` (download before open: never). */
static inline ferry_sync_options_t sync_options(const char *path) {
  ferry_sync_options_t so;
  CHECK_OK(ferry_sync_options_init(&so, FERRY_SYNC_OPTIONS_VERSION));
  so.path = path;
  so.schema = item_schema;
  return so;
}

static inline struct outcome wait_upload(ferry_sync_session_t *s) {
  struct waiter *w = waiter_new();
  return finish(ferry_sync_wait_for_upload(s, on_status, w), w, "ferry_sync_wait_for_upload");
}

static inline struct outcome wait_download(ferry_sync_session_t *s) {
  struct waiter *w = waiter_new();
  return finish(ferry_sync_wait_for_download(s, on_status, w), w, "ferry_sync_wait_for_download");
}

/* Adds (or replaces) the named subscription on Item and waits for the new set; returns the
 * wait's outcome (and the set's version in *out_version, when given). */
static inline struct outcome add_subscription(ferry_sync_session_t *s, const char *name, const char *query,
                                              uint64_t *out_version) {
  ferry_subscription_set_t *set = NULL;
  CHECK_OK(ferry_sync_subscriptions(&set, s));
  CHECK_OK(ferry_subscription_set_add(set, name, "Item", query));
  uint64_t version = 0;
  CHECK_OK(ferry_sync_update_subscriptions(&version, s, set));
  ferry_subscription_set_free(set);
  if (out_version) *out_version = version;
  struct waiter *w = waiter_new();
  return finish(ferry_sync_wait_for_subscriptions(s, version, on_status, w), w, "ferry_sync_wait_for_subscriptions");
}

#endif /* FERRY_TEST_SYNC_WAITERS_H */
