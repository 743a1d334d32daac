/*
 * test_sync_session.c — session control through the C API (connection state, pause and resume,
 * reconnection, keepalive and read timeout, multiplexing, progress, open with a download first,
 * in-memory synced databases) against a real ferry-server (sync_server.h) reached through
 * ferry-fault-proxy (fault_proxy.h), which puts resets, blackholes and refusals between the
 * two when a scenario asks for them. Each scenario has its own proxy (its own faults and
 * counters) and its own Apps.
 *
 *  - connection state: readable, and an observer receives (old, new) on the loop thread:
 *    disconnected -> connecting -> connected at open; a proxy `reset` gives connected ->
 *    disconnected, and the session reconnects by itself (backoff 50..500 ms); a freed observer
 *    hears nothing more, and its userdata_free runs exactly once;
 *  - read timeout: read_timeout_ms 1000 and ping_interval_ms 200 keep a connection through a
 *    `pass` window of 3 s (no disconnect observed: the pings' answers keep it alive); a
 *    `blackhole` drops it after about the read timeout (a silent handshake too), `pass` brings
 *    it back;
 *  - ferry_app_reconnect: with a 10-minute backoff and the proxy refusing, the session stays
 *    disconnected; after `pass`, ferry_app_reconnect connects it at once; while connected it
 *    changes nothing (no state callback, no new TCP connection);
 *  - suspend and resume: session states PAUSED / ACTIVE / INACTIVE, disconnected while paused,
 *    a write made while paused is not uploaded (its upload wait stays pending, another device
 *    does not see it) until resume, then it is (the wait completes OK, the other device sees
 *    it); a session whose App is freed is INACTIVE, and so is one whose user logged out;
 *  - multiplexing: two sessions of one user on one App share one connection (proxy stats:
 *    active=1), and suspending one leaves the other connected; with multiplex_sessions false
 *    each has its own (active=2);
 *  - progress: an upload notifier FOR_CURRENT_WORK registered after 5,000 items were written
 *    while paused reports < 1.0 first, then after resume monotonic estimates in [0, 1] ending
 *    exactly at 1.0, then nothing more; a REPORT_INDEFINITELY notifier reports the next unit of
 *    work up to 1.0; freeing a token runs userdata_free exactly once;
 *  - ferry_sync_open_async: download_before_open ALWAYS with an initial_subscriptions callback
 *    (run on the calling thread before the call returns) completes with another device's data
 *    already in the database; with the server unreachable (proxy `refuse`, or a closed port)
 *    and open_timeout_ms 1000 it completes with FERRY_ERR_TIMEOUT; ONCE waits at the file's
 *    first open only; an App freed while the open waits completes it with an error; an
 *    initial_subscriptions callback returning non-zero fails the open with
 *    FERRY_ERR_INVALID_ARGUMENT (naming the value), and so does ferry_sync_open;
 *  - in_memory: the path is only an identifier: no file is created there, data sync up, and
 *    are dropped when the session and every handle are closed.
 *
 * Callbacks run on Ferry's loop thread: the test waits for them on condition variables with
 * deadlines, never with a sleep (the proxy's counters are polled with a deadline; the waiters and
 * device helpers are shared with test_sync.c in sync_waiters.h). Paused
 * sessions end too when their App is freed or their user logs out, and stay ended on resume.
 * Exits 77 (CTest: skipped) without a ferry-server or ferry-fault-proxy binary.
 */
#include "check.h"
#include "sync_server.h"
#include "fault_proxy.h"
#include "sync_waiters.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>

static int server_port = 0;
static struct fault_proxy main_proxy; /* `pass` throughout: for the scenarios without faults */

/* ---- callback logs ----------------------------------------------------------------------------- */

/* What the connection state and progress logs share (their first member, so that their
 * observers' userdata can be given to on_log_free): the lock and the condition variable the
 * callbacks signal, how many callbacks came (entries beyond a log's capacity are counted, not
 * kept), how many ran on the host's main thread (must be none), and the userdata_free calls. */
struct log_core {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int count;
  int on_main_thread;
  int frees;
};

static void log_core_init(struct log_core *c) {
  pthread_mutex_init(&c->mu, NULL);
  cond_init_monotonic(&c->cv);
}

/* Counts a callback and wakes the waiters; called with c->mu held. */
static void log_core_counted(struct log_core *c) {
  c->count++;
  if (on_main_thread_now()) c->on_main_thread++;
  pthread_cond_broadcast(&c->cv);
}

/* The userdata_free of an observer whose userdata is a log. */
static void on_log_free(void *userdata) {
  struct log_core *c = userdata;
  pthread_mutex_lock(&c->mu);
  c->frees++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static int log_count(struct log_core *c) { return locked_int(&c->mu, &c->count); }
static int log_frees(struct log_core *c) { return locked_int(&c->mu, &c->frees); }

/* After a token was freed (`before`: log_frees() before that), waits for the userdata_free that
 * runs on the loop thread: exactly once. */
static void log_wait_freed(struct log_core *c, int before, const char *what) {
  struct timespec deadline = deadline_in(WAIT_SECONDS);
  pthread_mutex_lock(&c->mu);
  while (c->frees == before)
    if (pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == ETIMEDOUT) break;
  int frees = c->frees - before;
  pthread_mutex_unlock(&c->mu);
  CHECKF(frees == 1, "freeing a %s token ran its userdata_free %d times, expected once", what, frees);
}

/* Checks the log's userdata_free ran exactly once, then destroys its lock and condition variable. */
static void log_core_destroy(struct log_core *c, const char *what) {
  pthread_mutex_lock(&c->mu);
  CHECKF(c->frees == 1, "a %s's userdata_free ran %d times, expected once", what, c->frees);
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
}

/* ---- connection state observers ------------------------------------------------------------ */

#define MAX_TRANSITIONS 512

struct state_log {
  struct log_core core; /* first */
  int32_t from[MAX_TRANSITIONS], to[MAX_TRANSITIONS];
  double at[MAX_TRANSITIONS];
};

static struct state_log *state_log_new(void) {
  struct state_log *l = calloc(1, sizeof *l);
  CHECK(l != NULL);
  log_core_init(&l->core);
  return l;
}

static void on_state(void *userdata, int32_t old_state, int32_t new_state) {
  struct state_log *l = userdata;
  pthread_mutex_lock(&l->core.mu);
  int i = l->core.count;
  if (i < MAX_TRANSITIONS) {
    l->from[i] = old_state;
    l->to[i] = new_state;
    l->at[i] = now_s();
  }
  log_core_counted(&l->core);
  pthread_mutex_unlock(&l->core.mu);
}

static int state_count(struct state_log *l) { return log_count(&l->core); }

static const char *state_name(int32_t s) {
  switch (s) {
    case FERRY_CONNECTION_DISCONNECTED: return "disconnected";
    case FERRY_CONNECTION_CONNECTING: return "connecting";
    case FERRY_CONNECTION_CONNECTED: return "connected";
    default: return "(not a connection state)";
  }
}

/* Waits for a transition to `to` (from `from`, or from anything when from < 0) at index start
 * or later; its index, or -1 when none came within `seconds`. */
static int state_wait(struct state_log *l, int start, int32_t from, int32_t to, double seconds) {
  struct timespec deadline = deadline_in(seconds);
  pthread_mutex_lock(&l->core.mu);
  int found = -1;
  for (int i = start;; i++) {
    while (i >= l->core.count)
      if (pthread_cond_timedwait(&l->core.cv, &l->core.mu, &deadline) == ETIMEDOUT) goto out;
    if (i < MAX_TRANSITIONS && l->to[i] == to && (from < 0 || l->from[i] == from)) {
      found = i;
      break;
    }
  }
out:
  pthread_mutex_unlock(&l->core.mu);
  return found;
}

/* Waits until the session's connection state is `want` (read with ferry_sync_connection_state,
 * woken by the observer l); false after `seconds`. */
static bool wait_connection_state(ferry_sync_session_t *s, struct state_log *l, int32_t want, double seconds) {
  struct timespec deadline = deadline_in(seconds);
  pthread_mutex_lock(&l->core.mu);
  bool ok = false;
  for (;;) {
    int32_t cs = -1;
    CHECK_OK(ferry_sync_connection_state(&cs, s));
    if (cs == want) {
      ok = true;
      break;
    }
    if (pthread_cond_timedwait(&l->core.cv, &l->core.mu, &deadline) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&l->core.mu);
  return ok;
}

/* Every transition changes the state, and each starts where the previous one ended. */
static void state_check_chain(struct state_log *l, const char *what) {
  pthread_mutex_lock(&l->core.mu);
  int n = l->core.count < MAX_TRANSITIONS ? l->core.count : MAX_TRANSITIONS;
  for (int i = 0; i < n; i++) {
    CHECKF(l->from[i] >= 0 && l->from[i] <= 2 && l->to[i] >= 0 && l->to[i] <= 2, "%s: transition %d: %d -> %d", what, i,
           l->from[i], l->to[i]);
    CHECKF(l->from[i] != l->to[i], "%s: transition %d reports no change (%s)", what, i, state_name(l->to[i]));
    if (i > 0)
      CHECKF(l->from[i] == l->to[i - 1], "%s: transition %d starts at %s, the previous one ended at %s", what, i,
             state_name(l->from[i]), state_name(l->to[i - 1]));
  }
  CHECKF(l->core.on_main_thread == 0, "%s: %d state callbacks ran on the host's thread", what, l->core.on_main_thread);
  pthread_mutex_unlock(&l->core.mu);
}

static void state_print(struct state_log *l, const char *what) {
  pthread_mutex_lock(&l->core.mu);
  printf("  %s: ", what);
  int n = l->core.count < MAX_TRANSITIONS ? l->core.count : MAX_TRANSITIONS;
  if (n > 0) printf("%s", state_name(l->from[0]));
  for (int i = 0; i < n; i++) printf(" -> %s", state_name(l->to[i]));
  printf("\n");
  pthread_mutex_unlock(&l->core.mu);
}

static ferry_connection_state_token_t *observe(ferry_sync_session_t *s, struct state_log *l) {
  ferry_connection_state_token_t *t = NULL;
  CHECK_OK(ferry_sync_observe_connection_state(&t, s, on_state, l, on_log_free));
  CHECK(t != NULL);
  return t;
}

/* Frees the token; its userdata_free runs on the loop thread: waited for, exactly once. */
static void unobserve(ferry_connection_state_token_t *t, struct state_log *l) {
  int before = log_frees(&l->core);
  ferry_connection_state_token_free(t);
  log_wait_freed(&l->core, before, "connection state");
}

static void state_log_destroy(struct state_log *l) {
  log_core_destroy(&l->core, "connection state observer");
  free(l);
}

/* ---- the sync error handler (counted; the scenarios expect none unless they say so) ------------- */

struct error_log {
  pthread_mutex_t mu;
  int count;
  int32_t first_code;
  char first_message[512];
  int frees;
};

static void on_sync_error(void *userdata, ferry_sync_session_t *session, const ferry_sync_error_t *e) {
  (void)session;
  struct error_log *l = userdata;
  pthread_mutex_lock(&l->mu);
  if (l->count++ == 0) {
    l->first_code = e->code;
    snprintf(l->first_message, sizeof l->first_message, "%s", e->message ? e->message : "(NULL)");
  }
  pthread_mutex_unlock(&l->mu);
}

static void on_error_log_free(void *userdata) {
  struct error_log *l = userdata;
  pthread_mutex_lock(&l->mu);
  l->frees++;
  pthread_mutex_unlock(&l->mu);
}

/* ---- devices -------------------------------------------------------------------------------- */

/* The App options a scenario varies. */
struct app_cfg {
  const char *url;
  bool multiplex;
  uint64_t read_timeout_ms, ping_interval_ms, delay_min_ms, delay_max_ms;
};

/* Fast retries (50..500 ms), default keepalive. */
static struct app_cfg cfg_for(const char *url) {
  struct app_cfg c = {url, true, 120000, 60000, 50, 500};
  return c;
}

static ferry_app_t *app_new(const char *dir, struct app_cfg cfg) {
  ferry_app_options_t o = app_options(dir, cfg.url);
  o.multiplex_sessions = cfg.multiplex;
  o.read_timeout_ms = cfg.read_timeout_ms;
  o.ping_interval_ms = cfg.ping_interval_ms;
  o.reconnect_delay_min_ms = cfg.delay_min_ms;
  o.reconnect_delay_max_ms = cfg.delay_max_ms;
  return app_new_with(&o);
}

/* A new App with the error log installed, on a new base directory (or `dir`, reused). */
static void device_app_in(struct device *d, const char *name, struct app_cfg cfg, const char *dir) {
  device_dirs(d, name, dir);
  d->app = app_new(d->dir, cfg);
  d->errors = calloc(1, sizeof *d->errors);
  CHECK(d->errors != NULL);
  pthread_mutex_init(&d->errors->mu, NULL);
  CHECK_OK(ferry_app_set_sync_error_handler(d->app, on_sync_error, d->errors, on_error_log_free));
}

static void device_app(struct device *d, const char *name, struct app_cfg cfg) { device_app_in(d, name, cfg, NULL); }

/* ferry_sync_open (download before open: never) of the device's file. */
static void device_open(struct device *d) {
  ferry_sync_options_t so = sync_options(d->db_path);
  CHECK_OK(ferry_sync_open(&d->session, &d->db, d->user, &so));
}

static void check_no_sync_errors(struct device *d, const char *what) {
  pthread_mutex_lock(&d->errors->mu);
  CHECKF(d->errors->count == 0, "%s: %d sync errors (first: %d %s)", what, d->errors->count, d->errors->first_code,
         d->errors->first_message);
  pthread_mutex_unlock(&d->errors->mu);
}

/* Closes the device's session and database; its App and user stay. */
static void device_close_session(struct device *d) {
  ferry_sync_session_free(d->session);
  ferry_db_free(d->db);
  d->session = NULL;
  d->db = NULL;
}

/* Frees everything (any of it may already be NULL); the error handler's userdata exactly once. */
static void device_close(struct device *d) {
  device_free_handles(d);
  CHECK_EQ_INT(d->errors->frees, 1);
  pthread_mutex_destroy(&d->errors->mu);
  free(d->errors);
  memset(d, 0, sizeof *d);
}

static struct outcome subscribe(ferry_sync_session_t *s, const char *name, const char *query) {
  /* let the session bind and get its client file identity before the subscriptions change (as
   * test_sync.c does: a subscription update racing the loop thread's own write) */
  CHECK_OUTCOME_OK(wait_download(s), "download before subscribing");
  return add_subscription(s, name, query, NULL);
}

/* Creates `count` items in one write transaction (the first one's id is `first`, when given),
 * with names of about name_bytes bytes. */
static void create_sized_items(ferry_db_t *db, const char *owner, int count, ferry_value_t *first, size_t name_bytes) {
  CHECK_OK(ferry_db_begin_write(db));
  for (int i = 0; i < count; i++) {
    ferry_value_t id = new_oid();
    if (i == 0 && first) *first = id;
    char name[1024];
    int n = snprintf(name, sizeof name, "item %d ", i);
    for (; (size_t)n < name_bytes && (size_t)n < sizeof name - 1; n++) name[n] = (char)('a' + (i + n) % 26);
    name[n] = '\0';
    ferry_property_value_t vals[] = {pv(P_ID, id), pv(P_OWNER, v_str(owner)), pv(P_NAME, v_str(name)),
                                     pv(P_COMPLEXITY, v_int(i % 5))};
    CHECK_OK(ferry_object_create(db, 0, vals, 4));
  }
  CHECK_OK(ferry_db_commit(db));
}

static void create_items(ferry_db_t *db, const char *owner, int count, ferry_value_t *first) {
  create_sized_items(db, owner, count, first, 0);
}

static bool has_item(ferry_db_t *db, ferry_value_t id) {
  ferry_object_t *o = NULL;
  int rc = ferry_object_get(&o, db, 0, &id);
  if (rc == FERRY_ERR_NOT_FOUND) return false;
  CHECK_OK(rc);
  ferry_object_free(o);
  return true;
}

static int32_t session_state(ferry_sync_session_t *s) {
  int32_t v = -1;
  CHECK_OK(ferry_sync_session_state(&v, s));
  return v;
}

static int32_t connection_state(ferry_sync_session_t *s) {
  int32_t v = -1;
  CHECK_OK(ferry_sync_connection_state(&v, s));
  return v;
}

/* ---- the scenarios ---------------------------------------------------------------------------- */

static void test_connection_state_and_reset(void) {
  printf("connection state at open, proxy reset, automatic reconnection\n");
  struct fault_proxy p;
  proxy_start(&p, server_port);
  struct device a;
  device_app(&a, "state", cfg_for(p.url));
  device_login(&a, anonymous, false);
  struct state_log *l = state_log_new();
  device_open(&a);
  /* observer first, then the state: whatever the state read, every later change is observed */
  ferry_connection_state_token_t *t = observe(a.session, l);
  int32_t initial = connection_state(a.session);
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_ACTIVE);
  int connected = state_wait(l, 0, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS);
  CHECKF(connected >= 0, "the session did not connect through the proxy within %d s", WAIT_SECONDS);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_CONNECTED);
  state_print(l, "at open");
  pthread_mutex_lock(&l->core.mu);
  if (initial == FERRY_CONNECTION_DISCONNECTED) {
    /* read before the session was put on its connection: the observer saw the whole way */
    CHECKF(l->core.count == 2 && connected == 1, "at open: %d transitions, expected disconnected -> connecting -> connected", l->core.count);
    CHECK(l->from[0] == FERRY_CONNECTION_DISCONNECTED && l->to[0] == FERRY_CONNECTION_CONNECTING);
  } else {
    /* the loop thread had already started connecting when the observer was registered */
    CHECKF(initial == FERRY_CONNECTION_CONNECTING, "the state right after open was %s", state_name(initial));
    CHECKF(l->core.count <= 2 && connected == l->core.count - 1, "at open: %d transitions", l->core.count);
    printf("  note: the observer was registered after disconnected -> connecting\n");
  }
  pthread_mutex_unlock(&l->core.mu);

  /* the proxy resets the connection: connected -> disconnected, then back by itself */
  int mark = state_count(l);
  const char *reply = proxy_do(&p, "reset");
  CHECKF(atoi(reply + 3) >= 1, "proxy reset: \"%s\", expected at least one connection", reply);
  int down = state_wait(l, mark, FERRY_CONNECTION_CONNECTED, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS);
  CHECKF(down == mark, "after a reset: the first transition (%d) should be connected -> disconnected", down);
  int up = state_wait(l, mark, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS);
  CHECKF(up > down, "the session did not reconnect by itself within %d s of a reset", WAIT_SECONDS);
  state_print(l, "open, reset, reconnect");
  state_check_chain(l, "reset");
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_CONNECTED);
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_ACTIVE);
  /* and it syncs */
  CHECK_OUTCOME_OK(subscribe(a.session, "items", "complexity <= 4"), "subscribe after a reconnect");
  create_items(a.db, a.user_id, 1, NULL);
  CHECK_OUTCOME_OK(wait_upload(a.session), "upload after a reconnect");

  /* a second observer; the first one freed hears nothing more */
  struct state_log *l2 = state_log_new();
  ferry_connection_state_token_t *t2 = observe(a.session, l2);
  unobserve(t, l);
  int heard = state_count(l);
  proxy_do(&p, "reset");
  CHECKF(state_wait(l2, 0, FERRY_CONNECTION_CONNECTED, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS) == 0,
         "the second observer did not see the second reset");
  CHECKF(state_wait(l2, 1, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS) > 0,
         "no reconnection after the second reset");
  state_check_chain(l2, "second observer");
  CHECKF(state_count(l) == heard, "a freed observer was called %d more times", state_count(l) - heard);
  unobserve(t2, l2);
  check_no_sync_errors(&a, "reset");
  device_close(&a);
  state_log_destroy(l);
  state_log_destroy(l2);
  proxy_stop(&p);
}

static void test_read_timeout(void) {
  printf("keepalive and read timeout (read_timeout_ms 1000, ping_interval_ms 200)\n");
  struct fault_proxy p;
  proxy_start(&p, server_port);
  struct app_cfg cfg = cfg_for(p.url);
  cfg.read_timeout_ms = 1000;
  cfg.ping_interval_ms = 200;
  struct device a;
  device_app(&a, "keepalive", cfg);
  device_login(&a, anonymous, false);
  struct state_log *l = state_log_new();
  device_open(&a);
  ferry_connection_state_token_t *t = observe(a.session, l);
  CHECKF(wait_connection_state(a.session, l, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS), "not connected within %d s",
         WAIT_SECONDS);
  CHECK_OUTCOME_OK(subscribe(a.session, "items", "complexity <= 4"), "subscribe");

  /* a quiet but healthy connection: the pings' answers keep it alive past the read timeout */
  int mark = state_count(l);
  const double window = 3.0;
  double start = now_s();
  int dropped = state_wait(l, mark, -1, FERRY_CONNECTION_DISCONNECTED, window);
  double waited = now_s() - start;
  CHECKF(dropped < 0, "the connection dropped %.2f s into a %.0f s window of a healthy link (read timeout 1 s, pings every 200 ms)",
         dropped >= 0 ? l->at[dropped] - start : 0.0, window);
  CHECK(waited >= window - 0.01);
  CHECK_EQ_INT(state_count(l), mark);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_CONNECTED);

  /* a blackhole: nothing comes back, so the read timeout drops the connection */
  double hole = now_s();
  proxy_do(&p, "blackhole");
  int down = state_wait(l, mark, FERRY_CONNECTION_CONNECTED, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS);
  CHECKF(down == mark, "a blackholed connection was not dropped within %d s (transition %d)", WAIT_SECONDS, down);
  if (down >= 0) {
    double after = l->at[down] - hole;
    printf("  blackhole: disconnected after %.2f s\n", after);
    /* the last pong came at most a ping interval (plus a tick) before the blackhole */
    CHECKF(after >= 0.6, "dropped %.2f s after the blackhole began: sooner than the 1 s read timeout allows", after);
  }
  /* it retries, and a silent handshake is dropped by the same timeout */
  int retry = state_wait(l, down + 1, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS);
  CHECKF(retry > down, "no failed retry while blackholed within %d s", WAIT_SECONDS);
  /* pass: it comes back */
  int before_pass = state_count(l);
  proxy_do(&p, "pass");
  int up = state_wait(l, before_pass, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS);
  CHECKF(up >= 0, "not reconnected within %d s of pass", WAIT_SECONDS);
  state_check_chain(l, "read timeout");
  create_items(a.db, a.user_id, 1, NULL);
  CHECK_OUTCOME_OK(wait_upload(a.session), "upload after the blackhole");
  unobserve(t, l);
  check_no_sync_errors(&a, "read timeout");
  device_close(&a);
  state_log_destroy(l);
  proxy_stop(&p);
}

static void test_app_reconnect(void) {
  printf("ferry_app_reconnect (backoff 600000 ms)\n");
  struct fault_proxy p;
  proxy_start(&p, server_port);
  struct app_cfg cfg = cfg_for(p.url);
  cfg.delay_min_ms = 600000;
  cfg.delay_max_ms = 600000;
  struct device a;
  device_app(&a, "reconnect", cfg);
  device_login(&a, anonymous, false);
  /* nothing to retry yet: a no-op */
  CHECK_OK(ferry_app_reconnect(a.app));
  proxy_do(&p, "refuse");
  unsigned long long refused_before = proxy_stats(&p).refused;
  struct state_log *l = state_log_new();
  device_open(&a);
  ferry_connection_state_token_t *t = observe(a.session, l);
  /* the first attempt is refused: the session waits 5 to 10 minutes before the next one */
  double start = now_s();
  while (proxy_stats(&p).refused == refused_before && now_s() - start < WAIT_SECONDS) {
    struct timespec tick = {0, 20 * 1000 * 1000};
    nanosleep(&tick, NULL); /* polling the proxy's counters with a deadline */
  }
  CHECKF(proxy_stats(&p).refused > refused_before, "the session made no connection attempt within %d s", WAIT_SECONDS);
  CHECKF(wait_connection_state(a.session, l, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS),
         "a refused session is not disconnected within %d s", WAIT_SECONDS);
  int mark = state_count(l);
  CHECKF(mark >= 1 && l->to[mark - 1] == FERRY_CONNECTION_DISCONNECTED && l->from[mark - 1] == FERRY_CONNECTION_CONNECTING,
         "the refused attempt should end connecting -> disconnected");
  /* it stays disconnected (its next attempt is minutes away) */
  unsigned long long accepted = proxy_stats(&p).accepted;
  CHECKF(state_wait(l, mark, -1, FERRY_CONNECTION_CONNECTING, 1.0) < 0, "a new attempt within 1 s despite a 10-minute backoff");
  CHECK_EQ_INT(proxy_stats(&p).accepted, accepted);
  proxy_do(&p, "pass");
  double asked = now_s();
  CHECK_OK(ferry_app_reconnect(a.app));
  int up = state_wait(l, mark, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS);
  CHECKF(up >= 0, "ferry_app_reconnect did not connect within %d s (the backoff is 5+ minutes)", WAIT_SECONDS);
  if (up >= 0) printf("  connected %.2f s after ferry_app_reconnect\n", l->at[up] - asked);
  CHECKF(up == mark + 1 && l->from[mark] == FERRY_CONNECTION_DISCONNECTED && l->to[mark] == FERRY_CONNECTION_CONNECTING,
         "after ferry_app_reconnect: expected disconnected -> connecting -> connected");
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_CONNECTED);

  /* connected: ferry_app_reconnect changes nothing (the download wait is a barrier on the loop) */
  int heard = state_count(l);
  accepted = proxy_stats(&p).accepted;
  CHECK_OK(ferry_app_reconnect(a.app));
  CHECK_OK(ferry_app_reconnect(a.app));
  CHECK_OUTCOME_OK(wait_download(a.session), "download wait after ferry_app_reconnect");
  CHECKF(state_count(l) == heard, "ferry_app_reconnect on a connected session caused %d state changes", state_count(l) - heard);
  CHECK_EQ_INT(proxy_stats(&p).accepted, accepted);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_CONNECTED);
  state_check_chain(l, "reconnect");
  unobserve(t, l);
  check_no_sync_errors(&a, "reconnect");
  device_close(&a);
  state_log_destroy(l);
  proxy_stop(&p);
}

static void test_suspend_resume(void) {
  printf("suspend and resume\n");
  char email[128];
  random_email(email, sizeof email, "pause");
  struct device a, b;
  device_app(&a, "paused", cfg_for(main_proxy.url));
  device_login(&a, email_credentials(email, "password123"), true);
  device_app(&b, "watcher", cfg_for(main_proxy.url));
  device_login(&b, email_credentials(email, "password123"), false);
  device_open(&a);
  device_open(&b);
  CHECK_OUTCOME_OK(subscribe(a.session, "items", "complexity <= 4"), "subscribe a");
  CHECK_OUTCOME_OK(subscribe(b.session, "items", "complexity <= 4"), "subscribe b");
  struct state_log *l = state_log_new();
  ferry_connection_state_token_t *t = observe(a.session, l);
  CHECKF(wait_connection_state(a.session, l, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS), "a: not connected");
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_ACTIVE);
  CHECK_OK(ferry_sync_resume(a.session)); /* not paused: a no-op */

  int mark = state_count(l);
  CHECK_OK(ferry_sync_suspend(a.session));
  int32_t right_after = session_state(a.session);
  if (right_after != FERRY_SESSION_PAUSED)
    printf("  note: ferry_sync_session_state right after ferry_sync_suspend returned %d, not PAUSED (%d)\n", right_after,
           FERRY_SESSION_PAUSED);
  CHECKF(state_wait(l, mark, FERRY_CONNECTION_CONNECTED, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS) == mark,
         "suspending did not disconnect the session");
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_PAUSED);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_DISCONNECTED);
  CHECK_OK(ferry_sync_suspend(a.session)); /* already paused: a no-op */

  /* a write while paused: not uploaded, its wait pending, b does not see it */
  ferry_value_t id = v_null();
  create_items(a.db, a.user_id, 1, &id);
  struct waiter *upload = waiter_new();
  CHECK_OK(ferry_sync_wait_for_upload(a.session, on_status, upload));
  CHECK_OUTCOME_OK(wait_download(b.session), "b: download while a is paused"); /* also a barrier on the loop */
  CHECKF(!has_item(b.db, id), "b received an item written while a was paused");
  CHECKF(waiter_calls(upload) == 0, "an upload wait completed while the session was paused (code %d %s)", upload->code,
         upload->message);
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_PAUSED);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_DISCONNECTED);
  CHECKF(state_count(l) == mark + 1, "state changes while paused: %d", state_count(l) - mark - 1);

  /* resume: a new connection, the write goes up, the wait completes, b sees it */
  mark = state_count(l);
  CHECK_OK(ferry_sync_resume(a.session));
  CHECKF(state_wait(l, mark, FERRY_CONNECTION_CONNECTING, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS) == mark + 1,
         "after resume: expected disconnected -> connecting -> connected");
  CHECK(l->from[mark] == FERRY_CONNECTION_DISCONNECTED && l->to[mark] == FERRY_CONNECTION_CONNECTING);
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_ACTIVE);
  CHECK_OUTCOME_OK(finish(FERRY_OK, upload, "the upload wait made while paused"), "upload after resume");
  CHECK_OUTCOME_OK(wait_download(b.session), "b: download after resume");
  CHECKF(has_item(b.db, id), "b did not receive the item written while a was paused");
  CHECK_OK(ferry_sync_resume(a.session)); /* active: a no-op */
  CHECK_OUTCOME_OK(wait_download(a.session), "a: barrier");
  CHECK_EQ_INT(state_count(l), mark + 2);
  state_check_chain(l, "suspend/resume");
  check_no_sync_errors(&a, "suspend/resume a");
  check_no_sync_errors(&b, "suspend/resume b");

  /* the App freed: the session ended (INACTIVE, disconnected); suspend and resume are no-ops */
  mark = state_count(l);
  ferry_app_free(a.app);
  a.app = NULL;
  CHECK_EQ_INT(a.errors->frees, 1);
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_INACTIVE);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_DISCONNECTED);
  CHECK_OK(ferry_sync_suspend(a.session));
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_INACTIVE);
  CHECK_OK(ferry_sync_resume(a.session));
  CHECK_OUTCOME_OK(wait_download(b.session), "b: barrier");
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_INACTIVE);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_DISCONNECTED);
  state_check_chain(l, "after the App was freed");
  unobserve(t, l);
  state_log_destroy(l);

  /* a paused session whose App is freed ends too */
  struct device c;
  device_app(&c, "paused-then-freed", cfg_for(main_proxy.url));
  device_login(&c, anonymous, false);
  device_open(&c);
  struct state_log *lc = state_log_new();
  ferry_connection_state_token_t *tc = observe(c.session, lc);
  CHECK_OK(ferry_sync_suspend(c.session));
  CHECK_OUTCOME_OK(wait_download(b.session), "b: barrier");
  CHECK_EQ_INT(session_state(c.session), FERRY_SESSION_PAUSED);
  struct waiter *pending = waiter_new();
  CHECK_OK(ferry_sync_wait_for_download(c.session, on_status, pending));
  ferry_app_free(c.app);
  c.app = NULL;
  int32_t ended = session_state(c.session);
  CHECKF(ended == FERRY_SESSION_INACTIVE,
               "a paused session whose App was freed stays in state %d (PAUSED), not INACTIVE (%d)", ended,
               FERRY_SESSION_INACTIVE);
  CHECK_EQ_INT(connection_state(c.session), FERRY_CONNECTION_DISCONNECTED);
  /* its pending wait does not hang (docs/c-api.md: after ferry_app_free the waits complete
     with an error) */
  bool completed = waiter_wait_for(pending, WAIT_SECONDS);
  CHECKF(completed, "a download wait pending on a paused session did not complete when its App was freed");
  /* resuming a session of a freed App must not bring it back */
  CHECK_OK(ferry_sync_resume(c.session));
  CHECK_OUTCOME_OK(wait_download(b.session), "b: barrier");
  int32_t resumed = session_state(c.session), resumed_connection = connection_state(c.session);
  CHECKF(resumed != FERRY_SESSION_ACTIVE && resumed_connection == FERRY_CONNECTION_DISCONNECTED,
               "ferry_sync_resume on a paused session of a freed App makes it ACTIVE (%d) and %s", resumed,
               state_name(resumed_connection));
  ferry_sync_session_free(c.session);
  c.session = NULL;
  /* freeing the session completes the wait at the latest */
  CHECKF(waiter_wait(pending), "a wait pending on a paused session did not complete when its App and session were freed");
  if (waiter_calls(pending) > 0) {
    CHECKF(pending->code != FERRY_OK, "a download wait of a session whose App was freed completed OK");
    CHECK_EQ_INT(waiter_calls(pending), 1);
    waiter_free(pending);
  }
  unobserve(tc, lc);
  state_log_destroy(lc);
  device_close(&c);
  device_close(&a);
  device_close(&b);
}

static void test_log_out_ends_sessions(void) {
  printf("log out: the user's sessions end\n");
  struct device a;
  device_app(&a, "logout", cfg_for(main_proxy.url));
  device_login(&a, anonymous, false);
  device_open(&a);
  char path2[700];
  snprintf(path2, sizeof path2, "%s/paused.ferry", a.dir);
  ferry_sync_session_t *paused = NULL;
  ferry_db_t *paused_db = NULL;
  ferry_sync_options_t so = sync_options(path2);
  CHECK_OK(ferry_sync_open(&paused, &paused_db, a.user, &so));
  struct state_log *l = state_log_new();
  ferry_connection_state_token_t *t = observe(a.session, l);
  CHECK(wait_connection_state(a.session, l, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS));
  CHECK_OK(ferry_sync_suspend(paused));
  CHECK_OUTCOME_OK(wait_download(a.session), "barrier");
  CHECK_EQ_INT(session_state(paused), FERRY_SESSION_PAUSED);

  struct waiter *w = waiter_new();
  CHECK_OUTCOME_OK(finish(ferry_app_log_out(a.app, a.user, on_status, w), w, "ferry_app_log_out"), "log out");
  /* the active session ended: INACTIVE, disconnected, its waits fail at once */
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_INACTIVE);
  CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_DISCONNECTED);
  struct outcome o = wait_upload(a.session);
  CHECKF(o.code != FERRY_OK, "an upload wait on a session of a logged-out user succeeded");
  int heard = state_count(l);
  CHECK_OK(ferry_sync_resume(a.session)); /* not paused: nothing */
  CHECK_OK(ferry_app_reconnect(a.app));   /* its sessions stopped on a fatal error: nothing */
  o = wait_download(a.session);           /* (a barrier on the loop: fails at once) */
  CHECK(o.code != FERRY_OK);
  CHECK_EQ_INT(state_count(l), heard);
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_INACTIVE);
  state_check_chain(l, "log out");
  /* the paused one should have ended too */
  int32_t ended = session_state(paused);
  CHECKF(ended == FERRY_SESSION_INACTIVE, "a paused session of a user who logged out stays in state %d (PAUSED), not INACTIVE (%d)",
               ended, FERRY_SESSION_INACTIVE);
  CHECK_OK(ferry_sync_resume(paused));
  o = wait_download(a.session); /* a barrier: the resume ran */
  int32_t resumed = session_state(paused), resumed_connection = connection_state(paused);
  CHECKF(resumed != FERRY_SESSION_ACTIVE && resumed_connection == FERRY_CONNECTION_DISCONNECTED,
               "ferry_sync_resume on a paused session of a logged-out user makes it ACTIVE (%d) and %s", resumed,
               state_name(resumed_connection));
  ferry_sync_session_free(paused);
  ferry_db_free(paused_db);
  unobserve(t, l);
  state_log_destroy(l);
  device_close(&a);
}

static void test_multiplexing(void) {
  printf("multiplexing: two sessions of one user on one App\n");
  for (int multiplex = 1; multiplex >= 0; multiplex--) {
    struct fault_proxy p;
    proxy_start(&p, server_port);
    struct app_cfg cfg = cfg_for(p.url);
    cfg.multiplex = multiplex;
    struct device a;
    device_app(&a, multiplex ? "mux" : "no-mux", cfg);
    device_login(&a, anonymous, false);
    char path2[700];
    snprintf(path2, sizeof path2, "%s/second.ferry", a.dir);
    ferry_sync_session_t *s2 = NULL;
    ferry_db_t *db2 = NULL;
    device_open(&a);
    ferry_sync_options_t so = sync_options(path2);
    CHECK_OK(ferry_sync_open(&s2, &db2, a.user, &so));
    struct state_log *l1 = state_log_new(), *l2 = state_log_new();
    ferry_connection_state_token_t *t1 = observe(a.session, l1), *t2 = observe(s2, l2);
    CHECK(wait_connection_state(a.session, l1, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS));
    CHECK(wait_connection_state(s2, l2, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS));
    CHECK_OUTCOME_OK(subscribe(a.session, "items", "complexity <= 4"), "subscribe, first session");
    CHECK_OUTCOME_OK(subscribe(s2, "items", "complexity <= 4"), "subscribe, second session");
    /* both sync */
    create_items(a.db, a.user_id, 1, NULL);
    create_items(db2, a.user_id, 1, NULL);
    CHECK_OUTCOME_OK(wait_upload(a.session), "upload, first session");
    CHECK_OUTCOME_OK(wait_upload(s2), "upload, second session");
    unsigned long long want = multiplex ? 1 : 2;
    unsigned long long active = proxy_wait_active(&p, want, WAIT_SECONDS);
    CHECKF(active == want, "multiplex_sessions %s: %llu connections through the proxy, expected %llu",
           multiplex ? "true" : "false", active, want);
    CHECK_EQ_INT(connection_state(a.session), FERRY_CONNECTION_CONNECTED);
    CHECK_EQ_INT(connection_state(s2), FERRY_CONNECTION_CONNECTED);
    printf("  multiplex_sessions %s: %llu connection(s) for two sessions\n", multiplex ? "true" : "false", active);

    /* suspending one leaves the other connected and syncing */
    int heard2 = state_count(l2);
    CHECK_OK(ferry_sync_suspend(a.session));
    CHECK(wait_connection_state(a.session, l1, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS));
    create_items(db2, a.user_id, 1, NULL);
    CHECK_OUTCOME_OK(wait_upload(s2), "upload of the other session while one is paused");
    CHECKF(state_count(l2) == heard2, "suspending one session changed the other's connection state");
    CHECK_EQ_INT(connection_state(s2), FERRY_CONNECTION_CONNECTED);
    active = proxy_wait_active(&p, 1, WAIT_SECONDS);
    CHECKF(active == 1, "one session paused: %llu connections, expected 1", active);
    CHECK_OK(ferry_sync_resume(a.session));
    CHECK(wait_connection_state(a.session, l1, FERRY_CONNECTION_CONNECTED, WAIT_SECONDS));
    active = proxy_wait_active(&p, want, WAIT_SECONDS);
    CHECKF(active == want, "after resume: %llu connections, expected %llu", active, want);
    CHECK_EQ_INT(state_count(l2), heard2);
    state_check_chain(l1, "first session");
    state_check_chain(l2, "second session");

    unobserve(t1, l1);
    unobserve(t2, l2);
    state_log_destroy(l1);
    state_log_destroy(l2);
    ferry_sync_session_free(s2);
    ferry_db_free(db2);
    check_no_sync_errors(&a, "multiplexing");
    device_close(&a);
    proxy_stop(&p);
  }
}

/* ---- progress --------------------------------------------------------------------------------- */

#define MAX_REPORTS 4096

struct progress_log {
  struct log_core core; /* first */
  double estimate[MAX_REPORTS];
  uint64_t transferred[MAX_REPORTS], transferable[MAX_REPORTS];
};

static struct progress_log *progress_log_new(void) {
  struct progress_log *l = calloc(1, sizeof *l);
  CHECK(l != NULL);
  log_core_init(&l->core);
  return l;
}

static void on_progress(void *userdata, const ferry_progress_t *p) {
  struct progress_log *l = userdata;
  pthread_mutex_lock(&l->core.mu);
  int i = l->core.count;
  if (i < MAX_REPORTS) {
    l->estimate[i] = p->progress_estimate;
    l->transferred[i] = p->transferred_bytes;
    l->transferable[i] = p->transferable_bytes;
  }
  log_core_counted(&l->core);
  pthread_mutex_unlock(&l->core.mu);
}

static int progress_count(struct progress_log *l) { return log_count(&l->core); }

/* Waits for at least n reports (or, with until_done, a report of exactly 1.0); the count. */
static int progress_wait(struct progress_log *l, int n, bool until_done) {
  struct timespec deadline = deadline_in(WAIT_SECONDS);
  pthread_mutex_lock(&l->core.mu);
  for (;;) {
    bool done = l->core.count >= n;
    if (until_done) done = l->core.count > 0 && l->core.count <= MAX_REPORTS && l->estimate[l->core.count - 1] == 1.0;
    if (done) break;
    if (pthread_cond_timedwait(&l->core.cv, &l->core.mu, &deadline) == ETIMEDOUT) break;
  }
  int count = l->core.count;
  pthread_mutex_unlock(&l->core.mu);
  return count;
}

/* Estimates in [0, 1], never going down, exactly 1.0 at the end and only there; bytes agree. */
static void progress_check(struct progress_log *l, const char *what) {
  pthread_mutex_lock(&l->core.mu);
  int n = l->core.count < MAX_REPORTS ? l->core.count : MAX_REPORTS;
  CHECKF(n > 0, "%s: no reports", what);
  for (int i = 0; i < n; i++) {
    double e = l->estimate[i];
    CHECKF(e >= 0.0 && e <= 1.0, "%s: report %d: estimate %.17g outside [0, 1]", what, i, e);
    if (i > 0) CHECKF(e >= l->estimate[i - 1], "%s: report %d: estimate %.17g after %.17g", what, i, e, l->estimate[i - 1]);
    CHECKF(l->transferred[i] <= l->transferable[i], "%s: report %d: %llu of %llu bytes", what, i,
           (unsigned long long)l->transferred[i], (unsigned long long)l->transferable[i]);
    if (i < n - 1) CHECKF(e < 1.0, "%s: report %d of %d is already 1.0", what, i, n);
  }
  if (n > 0) {
    CHECKF(l->estimate[n - 1] == 1.0, "%s: the last report is %.17g, not exactly 1.0", what, l->estimate[n - 1]);
    CHECKF(l->transferred[n - 1] == l->transferable[n - 1], "%s: done at %llu of %llu bytes", what,
           (unsigned long long)l->transferred[n - 1], (unsigned long long)l->transferable[n - 1]);
  }
  CHECKF(l->core.on_main_thread == 0, "%s: %d progress callbacks ran on the host's thread", what, l->core.on_main_thread);
  pthread_mutex_unlock(&l->core.mu);
}

/* Frees the token and waits for its userdata_free (loop thread): exactly once. */
static void progress_unregister(ferry_progress_token_t *t, struct progress_log *l) {
  int before = log_frees(&l->core);
  ferry_progress_token_free(t);
  log_wait_freed(&l->core, before, "progress");
}

static void progress_log_destroy(struct progress_log *l) {
  log_core_destroy(&l->core, "progress notifier");
  free(l);
}

static void test_progress(void) {
  printf("upload progress of 5,000 items written while paused\n");
  struct device a;
  device_app(&a, "progress", cfg_for(main_proxy.url));
  device_login(&a, anonymous, false);
  device_open(&a);
  CHECK_OUTCOME_OK(subscribe(a.session, "items", "complexity <= 4"), "subscribe");
  struct state_log *l = state_log_new();
  ferry_connection_state_token_t *t = observe(a.session, l);
  CHECK_OK(ferry_sync_suspend(a.session));
  CHECK(wait_connection_state(a.session, l, FERRY_CONNECTION_DISCONNECTED, WAIT_SECONDS));
  CHECK_EQ_INT(session_state(a.session), FERRY_SESSION_PAUSED);
  /* about 3 MB of changesets: several upload batches of at most 1 MiB */
  for (int i = 0; i < 50; i++) create_sized_items(a.db, a.user_id, 100, NULL, 600);
  CHECK_EQ_INT(count_items(a.db), 5000);

  struct progress_log *p = progress_log_new();
  ferry_progress_token_t *token = NULL;
  CHECK_OK(ferry_sync_observe_progress(&token, a.session, FERRY_PROGRESS_UPLOAD, FERRY_PROGRESS_FOR_CURRENT_WORK, on_progress, p,
                                       on_log_free));
  CHECK(token != NULL);
  /* the first report comes shortly, while paused: work outstanding, nothing acknowledged */
  CHECKF(progress_wait(p, 1, false) >= 1, "no first progress report within %d s", WAIT_SECONDS);
  pthread_mutex_lock(&p->core.mu);
  CHECKF(p->estimate[0] < 1.0, "the first report while 5,000 items wait to be uploaded is %.17g", p->estimate[0]);
  CHECKF(p->transferable[0] > 0, "the first report counts %llu transferable bytes", (unsigned long long)p->transferable[0]);
  pthread_mutex_unlock(&p->core.mu);

  CHECK_OK(ferry_sync_resume(a.session));
  int n = progress_wait(p, 0, true);
  CHECKF(n > 0 && p->estimate[n - 1] == 1.0, "the upload notifier did not reach 1.0 within %d s", WAIT_SECONDS);
  CHECK_OUTCOME_OK(wait_upload(a.session), "upload of 5,000 items");
  progress_check(p, "FOR_CURRENT_WORK upload");
  printf("  %d reports, last %.3f (%llu of %llu bytes)\n", n, p->estimate[n - 1], (unsigned long long)p->transferred[n - 1],
         (unsigned long long)p->transferable[n - 1]);

  /* done: more work does not wake it; an indefinite notifier reports the new unit */
  struct progress_log *q = progress_log_new();
  ferry_progress_token_t *forever = NULL;
  CHECK_OK(ferry_sync_observe_progress(&forever, a.session, FERRY_PROGRESS_UPLOAD, FERRY_PROGRESS_REPORT_INDEFINITELY,
                                       on_progress, q, on_log_free));
  CHECKF(progress_wait(q, 1, false) >= 1, "no first report from a REPORT_INDEFINITELY notifier");
  int first_q = progress_count(q);
  create_items(a.db, a.user_id, 10, NULL);
  CHECK_OUTCOME_OK(wait_upload(a.session), "upload of 10 more items");
  CHECK_OUTCOME_OK(wait_download(a.session), "barrier");
  CHECKF(progress_count(p) == n, "a FOR_CURRENT_WORK notifier was called %d more times after reporting 1.0",
         progress_count(p) - n);
  int m = progress_count(q);
  CHECKF(m > first_q, "the REPORT_INDEFINITELY notifier did not report the upload of 10 more items");
  pthread_mutex_lock(&q->core.mu);
  CHECKF(q->estimate[m - 1] == 1.0, "the REPORT_INDEFINITELY notifier ended the unit at %.17g", q->estimate[m - 1]);
  for (int i = first_q; i < m; i++)
    CHECKF(q->estimate[i] >= 0.0 && q->estimate[i] <= 1.0 && (i == first_q || q->estimate[i] >= q->estimate[i - 1]),
           "REPORT_INDEFINITELY report %d: %.17g", i, q->estimate[i]);
  pthread_mutex_unlock(&q->core.mu);

  progress_unregister(token, p);
  progress_unregister(forever, q);
  int after = progress_count(q);
  create_items(a.db, a.user_id, 1, NULL);
  CHECK_OUTCOME_OK(wait_upload(a.session), "upload after the tokens were freed");
  CHECK_OUTCOME_OK(wait_download(a.session), "barrier");
  CHECKF(progress_count(q) == after, "a freed progress notifier was called");
  progress_log_destroy(p);
  progress_log_destroy(q);
  unobserve(t, l);
  state_log_destroy(l);
  check_no_sync_errors(&a, "progress");
  device_close(&a);
}

/* ---- ferry_sync_open_async --------------------------------------------------------------------- */

struct initial_subs {
  int calls;
  bool on_main_thread;
  int add_rc;
  int return_value;
};

static int on_initial_subscriptions(void *userdata, ferry_subscription_set_t *set) {
  struct initial_subs *s = userdata;
  s->calls++;
  s->on_main_thread = on_main_thread_now();
  size_t n = 99;
  if (ferry_subscription_set_count(&n, set) != FERRY_OK || n != 0) s->add_rc = -9998; /* a new file: an empty set */
  else s->add_rc = ferry_subscription_set_add(set, "items", "Item", "complexity <= 4");
  return s->return_value;
}

/* Opens with ferry_sync_open_async and waits for the completion. On success *session and *db
 * receive the handles. `probe`, when not null, is looked up inside the completion. */
static struct outcome open_async(ferry_user_t *user, const ferry_sync_options_t *so, ferry_value_t probe,
                                 ferry_sync_session_t **session, ferry_db_t **db, int *found_in_callback) {
  struct waiter *w = waiter_new();
  w->probe = probe;
  int rc = ferry_sync_open_async(user, so, on_open, w);
  if (rc == FERRY_OK && waiter_wait(w)) {
    pthread_mutex_lock(&w->mu);
    CHECKF(!w->handles_and_error, "the open completion got handles with an error, or neither without one");
    *session = w->session;
    *db = w->db;
    if (found_in_callback) *found_in_callback = w->found_in_callback;
    pthread_mutex_unlock(&w->mu);
  }
  return finish(rc, w, "ferry_sync_open_async");
}

/* An open_async that must succeed with `probe` there inside its completion; the handles are
 * closed again. */
static void open_async_finds(ferry_user_t *user, const ferry_sync_options_t *so, ferry_value_t probe, const char *what) {
  ferry_sync_session_t *s = NULL;
  ferry_db_t *db = NULL;
  int found = -1;
  CHECK_OUTCOME_OK(open_async(user, so, probe, &s, &db, &found), what);
  CHECK_EQ_INT(found, FERRY_OK);
  ferry_sync_session_free(s);
  ferry_db_free(db);
}

/* An open_async that waits for a download the server never gives (open_timeout_ms 1000): it
 * completes with FERRY_ERR_TIMEOUT, no sooner than the timeout, without handles. Its outcome,
 * and how long it took in *took. */
static struct outcome open_async_times_out(ferry_user_t *user, const ferry_sync_options_t *so, const char *what,
                                           double *took) {
  ferry_sync_session_t *s = NULL;
  ferry_db_t *db = NULL;
  double start = now_s();
  struct outcome o = open_async(user, so, v_null(), &s, &db, NULL);
  *took = now_s() - start;
  CHECKF(o.code == FERRY_ERR_TIMEOUT, "%s: %d (%s) %s, expected TIMEOUT", what, o.code, ferry_strerror(o.code), o.message);
  CHECKF(*took >= 0.9, "the 1 s open timeout fired after %.2f s", *took);
  CHECK(s == NULL && db == NULL);
  return o;
}

static void test_open_async(void) {
  printf("ferry_sync_open_async: download before open, initial subscriptions, timeouts\n");
  char email[128];
  random_email(email, sizeof email, "boot");
  /* b writes an item and uploads it */
  struct device b;
  device_app(&b, "writer", cfg_for(main_proxy.url));
  device_login(&b, email_credentials(email, "password123"), true);
  device_open(&b);
  CHECK_OUTCOME_OK(subscribe(b.session, "items", "complexity <= 4"), "subscribe b");
  ferry_value_t id = v_null();
  create_items(b.db, b.user_id, 3, &id);
  CHECK_OUTCOME_OK(wait_upload(b.session), "b: upload");

  /* a, same user on a new device: ALWAYS with initial subscriptions; b's items are there */
  struct device a;
  device_app(&a, "bootstrap", cfg_for(main_proxy.url));
  device_login(&a, email_credentials(email, "password123"), false);
  struct initial_subs subs = {0, false, -9999, FERRY_OK};
  static char a_path[700]; /* outlives device a (closed below, its struct zeroed) */
  snprintf(a_path, sizeof a_path, "%s", a.db_path);
  ferry_sync_options_t so = sync_options(a_path);
  so.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS;
  so.initial_subscriptions = on_initial_subscriptions;
  so.initial_subscriptions_userdata = &subs;
  struct waiter *w = waiter_new();
  w->probe = id;
  CHECK_OK(ferry_sync_open_async(a.user, &so, on_open, w));
  /* "called on the opening thread, before the call returns" */
  CHECK_EQ_INT(subs.calls, 1);
  CHECK(subs.on_main_thread);
  CHECK_OK(subs.add_rc);
  CHECKF(waiter_wait(w), "ferry_sync_open_async (ALWAYS) did not complete within %d s", WAIT_SECONDS);
  pthread_mutex_lock(&w->mu);
  CHECKF(w->code == FERRY_OK, "ferry_sync_open_async (ALWAYS): %d (%s) %s", w->code, ferry_strerror(w->code), w->message);
  CHECK(!w->handles_and_error && !w->on_main_thread && w->calls == 1);
  CHECKF(w->found_in_callback == FERRY_OK, "another device's item was not there inside the completion (%d)", w->found_in_callback);
  a.session = w->session;
  a.db = w->db;
  pthread_mutex_unlock(&w->mu);
  waiter_free(w);
  if (a.db) {
    CHECK_EQ_INT(count_items(a.db), 3);
    ferry_subscription_set_t *set = NULL;
    size_t n = 0;
    int32_t state = -1;
    const char *name = NULL, *query = NULL;
    CHECK_OK(ferry_sync_subscriptions(&set, a.session));
    CHECK_OK(ferry_subscription_set_count(&n, set));
    CHECK_OK(ferry_subscription_set_state(&state, set));
    CHECK_OK(ferry_subscription_set_get(&name, NULL, &query, set, 0));
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(state, FERRY_SUBSCRIPTIONS_COMPLETE);
    CHECK_STREQ(name, "items");
    CHECK_STREQ(query, "complexity <= 4");
    ferry_subscription_set_free(set);
  }
  device_close_session(&a);
  /* opened again: the set exists, so the callback does not run again (rerun false) */
  subs.calls = 0;
  int found = -1;
  CHECK_OUTCOME_OK(open_async(a.user, &so, id, &a.session, &a.db, &found), "second ALWAYS open");
  CHECK_EQ_INT(subs.calls, 0);
  CHECK_EQ_INT(found, FERRY_OK);
  device_close_session(&a);
  /* rerun_initial_subscriptions: it runs on every open (with the set as stored) */
  so.rerun_initial_subscriptions = true;
  subs.calls = 0;
  struct outcome o = open_async(a.user, &so, id, &a.session, &a.db, NULL);
  CHECK_EQ_INT(subs.calls, 1);
  /* the stored set is not empty, so the callback left it alone and said so (add_rc -9998) */
  CHECK_EQ_INT(subs.add_rc, -9998);
  CHECK_OUTCOME_OK(o, "open with rerun_initial_subscriptions");
  device_close_session(&a);
  so.rerun_initial_subscriptions = false;

  /* the initial subscriptions callback fails the open: INVALID_ARGUMENT naming its value */
  static char bad_path[700];
  snprintf(bad_path, sizeof bad_path, "%s/refused-subs.ferry", a.dir);
  ferry_sync_options_t bad = so;
  bad.path = bad_path;
  struct initial_subs refusing = {0, false, -9999, 4242};
  bad.initial_subscriptions_userdata = &refusing;
  ferry_sync_session_t *s = NULL;
  ferry_db_t *db = NULL;
  o = open_async(a.user, &bad, v_null(), &s, &db, NULL);
  CHECK_EQ_INT(refusing.calls, 1);
  CHECKF(o.code == FERRY_ERR_INVALID_ARGUMENT, "an initial subscriptions callback returning 4242: %d (%s) %s, expected INVALID_ARGUMENT",
         o.code, ferry_strerror(o.code), o.message);
  CHECKF(strstr(o.message, "4242") != NULL, "the message should name the callback's value 4242: %s", o.message);
  CHECK(s == NULL && db == NULL);
  /* and ferry_sync_open the same */
  refusing.calls = 0;
  bad.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_NEVER;
  ferry_sync_session_t *untouched_s = (ferry_sync_session_t *)&s;
  ferry_db_t *untouched_db = (ferry_db_t *)&db;
  s = untouched_s;
  db = untouched_db;
  CHECK_ERR(ferry_sync_open(&s, &db, a.user, &bad), FERRY_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(ferry_error_last()->message, "4242") != NULL, "ferry_sync_open: the message should name 4242: %s",
         ferry_error_last()->message);
  CHECK(s == untouched_s && db == untouched_db);
  CHECK_EQ_INT(refusing.calls, 1);

  /* ONCE: the first open of a file waits for the download */
  static char once_path[700];
  snprintf(once_path, sizeof once_path, "%s/once.ferry", a.dir);
  ferry_sync_options_t once = so;
  once.path = once_path;
  once.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ONCE;
  subs.calls = 0;
  CHECK_OUTCOME_OK(open_async(a.user, &once, id, &s, &db, &found), "first ONCE open");
  CHECK_EQ_INT(subs.calls, 1);
  CHECKF(found == FERRY_OK, "ONCE: another device's item was not there inside the first open's completion (%d)", found);
  ferry_sync_session_free(s);
  ferry_db_free(db);
  check_no_sync_errors(&a, "open_async");
  char dir[640];
  snprintf(dir, sizeof dir, "%s", a.dir);
  device_close(&a);

  /* the server unreachable: a closed port (the user comes from the App's cache) */
  struct app_cfg closed = cfg_for("");
  char closed_url[64];
  snprintf(closed_url, sizeof closed_url, "http://127.0.0.1:%d", closed_port());
  closed.url = closed_url;
  struct device c;
  device_app_in(&c, "closed", closed, dir);
  CHECK_OK(ferry_app_current_user(&c.user, c.app));
  CHECKF(c.user != NULL, "no cached user");
  /* ONCE, second open of that file: no download first, so it opens offline */
  open_async_finds(c.user, &once, id, "second ONCE open, offline");
  /* ALWAYS with a 1 s timeout: FERRY_ERR_TIMEOUT */
  ferry_sync_options_t always = so;
  always.open_timeout_ms = 1000;
  double took = 0.0;
  o = open_async_times_out(c.user, &always, "ALWAYS on a closed port", &took);
  printf("  closed port: FERRY_ERR_TIMEOUT after %.2f s: %s\n", took, o.message);
  /* NEVER through ferry_sync_open_async: completes at once, offline */
  ferry_sync_options_t never = so;
  never.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_NEVER;
  open_async_finds(c.user, &never, id, "NEVER open, offline");
  /* the App freed while an ALWAYS open waits (30 s timeout): completed once, with an error */
  always.open_timeout_ms = 30000;
  struct waiter *pending = waiter_new();
  CHECK_OK(ferry_sync_open_async(c.user, &always, on_open, pending));
  ferry_app_free(c.app);
  c.app = NULL;
  o = finish(FERRY_OK, pending, "ferry_sync_open_async, App freed while waiting");
  CHECKF(o.code != FERRY_OK && o.code != -9999, "an open waiting for a download succeeded although its App was freed");
  printf("  App freed during an ALWAYS open: %d (%s) %s\n", o.code, ferry_strerror(o.code), o.message);
  device_close(&c);

  /* the server unreachable: the proxy refuses every connection */
  struct fault_proxy p;
  proxy_start(&p, server_port);
  struct device d;
  device_app(&d, "refused", cfg_for(p.url));
  device_login(&d, email_credentials(email, "password123"), false);
  proxy_do(&p, "refuse");
  ferry_sync_options_t refused = sync_options(d.db_path);
  refused.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS;
  refused.open_timeout_ms = 1000;
  refused.initial_subscriptions = on_initial_subscriptions;
  struct initial_subs subs2 = {0, false, -9999, FERRY_OK};
  refused.initial_subscriptions_userdata = &subs2;
  open_async_times_out(d.user, &refused, "ALWAYS through a refusing proxy", &took);
  CHECK(proxy_stats(&p).refused >= 1);
  /* pass: the same open succeeds */
  proxy_do(&p, "pass");
  refused.open_timeout_ms = 30000;
  open_async_finds(d.user, &refused, id, "ALWAYS after pass");
  device_close(&d);
  proxy_stop(&p);
  check_no_sync_errors(&b, "open_async writer");
  device_close(&b);
}

/* ---- in-memory synced databases ------------------------------------------------------------------ */

static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "opendir %s: %s", dir, strerror(errno));
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static void test_in_memory(void) {
  printf("in-memory synced database\n");
  char email[128];
  random_email(email, sizeof email, "mem");
  struct device a, b;
  device_app(&a, "memory", cfg_for(main_proxy.url));
  device_login(&a, email_credentials(email, "password123"), true);
  device_app(&b, "disk", cfg_for(main_proxy.url));
  device_login(&b, email_credentials(email, "password123"), false);
  device_open(&b);
  CHECK_OUTCOME_OK(subscribe(b.session, "items", "complexity <= 4"), "subscribe b");

  char empty_dir[700], ident[760];
  snprintf(empty_dir, sizeof empty_dir, "%s/memory-only", a.dir);
  CHECK(mkdir(empty_dir, 0700) == 0);
  snprintf(ident, sizeof ident, "%s/items.ferry", empty_dir);
  ferry_sync_options_t so = sync_options(ident);
  so.in_memory = true;
  CHECK_OK(ferry_sync_open(&a.session, &a.db, a.user, &so));
  CHECK_OUTCOME_OK(subscribe(a.session, "items", "complexity <= 4"), "subscribe in memory");
  ferry_value_t id = v_null();
  create_items(a.db, a.user_id, 2, &id);
  CHECK_OUTCOME_OK(wait_upload(a.session), "upload from memory");
  struct stat st;
  CHECKF(stat(ident, &st) != 0, "an in-memory synced database created %s", ident);
  CHECKF(dir_entries(empty_dir) == 0, "an in-memory synced database wrote %d files next to its identifier", dir_entries(empty_dir));
  CHECK_OUTCOME_OK(wait_download(b.session), "b: download");
  CHECKF(has_item(b.db, id), "b did not receive an item written to an in-memory synced database");
  /* a second handle with the same identifier shares it (ferry_db_open's in-memory identifier) */
  ferry_db_t *other = NULL;
  CHECK_OK(db_open_mem(&other, ident, NULL, FERRY_DELIVERY_LOOP));
  CHECK_EQ_INT(count_items(other), 2);
  ferry_db_free(other);

  /* closed everywhere: dropped. Reopened without subscriptions (nothing downloads): empty */
  device_close_session(&a);
  CHECK_OK(ferry_sync_open(&a.session, &a.db, a.user, &so));
  CHECK_EQ_INT(count_items(a.db), 0);
  ferry_subscription_set_t *set = NULL;
  uint64_t version = 99;
  CHECK_OK(ferry_sync_subscriptions(&set, a.session));
  CHECK_OK(ferry_subscription_set_version(&version, set));
  CHECK_EQ_INT(version, 0);
  ferry_subscription_set_free(set);
  CHECK_EQ_INT(dir_entries(empty_dir), 0);
  check_no_sync_errors(&a, "in memory");
  check_no_sync_errors(&b, "in memory, b");
  device_close(&a);
  device_close(&b);
  CHECK_EQ_INT(dir_entries(empty_dir), 0);
}

int main(void) {
  /* SIGPIPE keeps its default action: a server closing a socket must not kill the host. */
  note_main_thread();
  if (!proxy_available()) {
    printf("test_sync_session: SKIPPED: %s\n", fault_proxy_skip_reason);
    return 77;
  }
  if (!server_start()) {
    printf("test_sync_session: SKIPPED: %s\n", server_skip_reason);
    return 77;
  }
  CHECK(sscanf(base_url, "http://127.0.0.1:%d", &server_port) == 1 && server_port > 0);
  proxy_start(&main_proxy, server_port);
  make_item_schema();
  printf("test_sync_session: ferry-server at %s, main proxy at %s\n", base_url, main_proxy.url);
  fflush(stdout);
  double start = now_s();
#define RUN(f)                                                  \
  do {                                                          \
    double t0_ = now_s();                                       \
    f();                                                        \
    printf("  (%s: %.1f s)\n", #f, now_s() - t0_);               \
    fflush(stdout);                                             \
  } while (0)
  RUN(test_connection_state_and_reset);
  RUN(test_read_timeout);
  RUN(test_app_reconnect);
  RUN(test_suspend_resume);
  RUN(test_log_out_ends_sessions);
  RUN(test_multiplexing);
  RUN(test_progress);
  RUN(test_open_async);
  RUN(test_in_memory);
  printf("test_sync_session: %.1f s\n", now_s() - start);
  ferry_schema_free(item_schema);
  proxy_stop(&main_proxy);
  server_stop();
  return check_done("test_sync_session");
}
