/*
 * test_receipts.c — write receipts through the C API (issue 15, item 3).
 *
 *  - local: every commit that changes something has a distinct receipt, an empty one has 0
 *    (ACKNOWLEDGED); an unsynced database keeps its receipts LOCAL; bad arguments are errors;
 *  - against a real ferry-server (a subprocess on an OS-chosen port, sync_server.h): a paused
 *    session keeps receipts LOCAL; after resume, ferry_sync_wait_for_receipt reports UPLOADED
 *    or later, then ACKNOWLEDGED; of three transactions uploaded together only the one that
 *    wrote the object the server reverted (complexity 7, outside the view) is REJECTED, with
 *    its compensating write; ferry_db_read_receipt gives the same on the calling thread;
 *  - a restart: committed offline, every handle freed, a new App on the same directory (the
 *    cached user) opens the file again: the receipt becomes ACKNOWLEDGED.
 *
 * Callbacks run on the loop thread: the test waits on a condition variable with a deadline,
 * never with a sleep. The local part runs without a server; the rest exits 77 (skipped)
 * without the server binary.
 */
#include "check.h"
#include "sync_server.h"
#include "sync_waiters.h"

/* One receipt callback's result (heap: a callback that never came may still come later). */
struct receipt_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int code;
  uint64_t receipt;
  int32_t state;
  size_t writes;
  char object_type[64];
  ferry_value_t primary_key; /* an ObjectId, copied by value */
  char reason[512];
  bool on_main_thread;
};

static struct receipt_waiter *receipt_waiter_new(void) {
  struct receipt_waiter *w = calloc(1, sizeof *w);
  CHECK(w != NULL);
  pthread_mutex_init(&w->mu, NULL);
  cond_init_monotonic(&w->cv);
  w->state = -1;
  return w;
}

static void receipt_waiter_free(struct receipt_waiter *w) {
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

static void on_receipt(void *userdata, const ferry_receipt_t *r, const ferry_error_t *e) {
  struct receipt_waiter *w = userdata;
  pthread_mutex_lock(&w->mu);
  if ((r == NULL) == (e == NULL)) w->code = -8888; /* exactly one of them, says the header */
  else w->code = e ? e->code : FERRY_OK;
  if (r) {
    w->receipt = r->receipt;
    w->state = r->state;
    w->writes = r->compensating_writes_count;
    if (r->compensating_writes_count > 0) {
      const ferry_compensating_write_t *c = &r->compensating_writes[0];
      snprintf(w->object_type, sizeof w->object_type, "%s", c->object_type);
      w->primary_key = c->primary_key;
      snprintf(w->reason, sizeof w->reason, "%s", c->reason);
    }
  }
  w->on_main_thread = on_main_thread_now();
  w->calls++;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* Waits for the receipt to reach `state` (or a final state); returns the state it reported,
 * or -1 (checked as a failure) when the wait failed or timed out. *out gets a copy. */
static int32_t wait_receipt(ferry_sync_session_t *s, uint64_t receipt, int32_t state, struct receipt_waiter *out) {
  struct receipt_waiter *w = receipt_waiter_new();
  CHECK_OK(ferry_sync_wait_for_receipt(s, receipt, state, on_receipt, w));
  struct timespec deadline = deadline_in(WAIT_SECONDS);
  pthread_mutex_lock(&w->mu);
  while (w->calls == 0)
    if (pthread_cond_timedwait(&w->cv, &w->mu, &deadline) == ETIMEDOUT) break;
  bool done = w->calls > 0;
  pthread_mutex_unlock(&w->mu);
  CHECKF(done, "receipt %llu: no callback within %d s", (unsigned long long)receipt, WAIT_SECONDS);
  if (!done) return -1; /* w leaked on purpose */
  CHECKF(w->calls == 1, "receipt callback called %d times", w->calls);
  CHECKF(w->code == FERRY_OK, "receipt wait failed: %d (%s)", w->code, ferry_strerror(w->code));
  CHECKF(!w->on_main_thread, "the receipt callback ran on the host's thread, not the loop thread");
  CHECK(w->receipt == receipt);
  int32_t got = w->code == FERRY_OK ? w->state : -1;
  if (out) *out = *w;
  receipt_waiter_free(w);
  return got;
}

static uint64_t create_item_receipt(ferry_db_t *db, ferry_value_t id, const char *owner, int64_t complexity) {
  CHECK_OK(ferry_db_begin_write(db));
  ferry_property_value_t vals[] = {pv(P_ID, id), pv(P_OWNER, v_str(owner)), pv(P_NAME, v_str("x")),
                                   pv(P_COMPLEXITY, v_int(complexity))};
  CHECK_OK(ferry_object_create(db, 0, vals, 4));
  uint64_t r = 0;
  CHECK_OK(ferry_db_commit_with_receipt(&r, db));
  return r;
}

static int32_t receipt_state(ferry_db_t *db, uint64_t r) {
  int32_t state = -1;
  CHECK_OK(ferry_db_receipt_state(&state, db, r));
  return state;
}

/* ---- local -------------------------------------------------------------------------------- */

static void test_local_receipts(void) {
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, test_path("local.ferry"), item_schema, FERRY_DELIVERY_POLL, false));
  uint64_t a = create_item_receipt(db, new_oid(), "me", 1);
  uint64_t b = create_item_receipt(db, new_oid(), "me", 2);
  CHECKF(a > 0 && b > a, "receipts %llu then %llu", (unsigned long long)a, (unsigned long long)b);
  CHECK_EQ_INT(receipt_state(db, a), FERRY_RECEIPT_LOCAL);
  /* an empty transaction: receipt 0, nothing to sync */
  uint64_t empty = 777;
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_db_commit_with_receipt(&empty, db));
  CHECK(empty == 0);
  CHECK_EQ_INT(receipt_state(db, 0), FERRY_RECEIPT_ACKNOWLEDGED);
  /* the out-parameter may be NULL */
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_db_commit_with_receipt(NULL, db));
  /* errors */
  uint64_t untouched = 777;
  CHECK_ERR(ferry_db_commit_with_receipt(&untouched, db), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK(untouched == 777);
  CHECK_ERR(ferry_db_receipt_state(NULL, db, a), FERRY_ERR_INVALID_ARGUMENT);
  int32_t state = 777;
  CHECK_ERR(ferry_db_receipt_state(&state, db, b + 1000), FERRY_ERR_NOT_FOUND);
  CHECK(state == 777);
  CHECK_ERR(ferry_db_read_receipt(db, a, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  /* read: called once, on this thread, before the call returns */
  struct receipt_waiter *w = receipt_waiter_new();
  note_main_thread();
  CHECK_OK(ferry_db_read_receipt(db, a, on_receipt, w));
  CHECK_EQ_INT(w->calls, 1);
  CHECK(w->on_main_thread && w->receipt == a && w->state == FERRY_RECEIPT_LOCAL && w->writes == 0);
  main_thread_known = false;
  CHECK_ERR(ferry_db_read_receipt(db, b + 1000, on_receipt, w), FERRY_ERR_NOT_FOUND);
  CHECK_EQ_INT(w->calls, 1);
  receipt_waiter_free(w);
  ferry_db_free(db);
}

/* ---- synced ------------------------------------------------------------------------------- */

struct device_handles {
  char dir[640];
  char path[700];
  ferry_app_t *app;
  ferry_user_t *user;
  const char *user_id;
  ferry_sync_session_t *session;
  ferry_db_t *db;
};

static void open_session(struct device_handles *d) {
  ferry_sync_options_t so = sync_options(d->path);
  CHECK_OK(ferry_sync_open(&d->session, &d->db, d->user, &so));
  CHECK_OUTCOME_OK(wait_download(d->session), "the first download");
}

static void device_start(struct device_handles *d, const char *name) {
  memset(d, 0, sizeof *d);
  snprintf(d->dir, sizeof d->dir, "%s", test_path(name));
  CHECKF(mkdir(d->dir, 0700) == 0, "mkdir %s: %s", d->dir, strerror(errno));
  snprintf(d->path, sizeof d->path, "%s/items.ferry", d->dir);
  ferry_app_options_t o = app_options(d->dir, base_url);
  d->app = app_new_with(&o);
  CHECK_OUTCOME_OK(log_in(d->app, &anonymous, &d->user), "log in");
  CHECK_OK(ferry_user_id(&d->user_id, d->user));
  open_session(d);
  CHECK_OUTCOME_OK(add_subscription(d->session, "items", "complexity <= 4", NULL), "subscribe");
}

static void device_stop(struct device_handles *d) {
  ferry_sync_session_free(d->session);
  ferry_db_free(d->db);
  ferry_user_free(d->user);
  ferry_app_free(d->app);
  d->session = NULL;
  d->db = NULL;
  d->user = NULL;
  d->app = NULL;
}

static void test_states_and_rejection(void) {
  struct device_handles d;
  device_start(&d, "states");
  CHECK_OK(ferry_sync_suspend(d.session));
  ferry_value_t good = new_oid(), bad = new_oid();
  uint64_t r1 = create_item_receipt(d.db, good, d.user_id, 1);
  uint64_t r2 = create_item_receipt(d.db, bad, d.user_id, 7); /* outside the view: reverted */
  uint64_t r3 = create_item_receipt(d.db, new_oid(), d.user_id, 2);
  CHECK_EQ_INT(receipt_state(d.db, r1), FERRY_RECEIPT_LOCAL);
  CHECK_EQ_INT(receipt_state(d.db, r2), FERRY_RECEIPT_LOCAL);
  CHECK_OK(ferry_sync_resume(d.session));
  int32_t s = wait_receipt(d.session, r1, FERRY_RECEIPT_UPLOADED, NULL);
  CHECKF(s >= FERRY_RECEIPT_UPLOADED, "receipt r1 reported %d waiting for UPLOADED", s);
  CHECK_EQ_INT(wait_receipt(d.session, r1, FERRY_RECEIPT_ACKNOWLEDGED, NULL), FERRY_RECEIPT_ACKNOWLEDGED);
  CHECK_EQ_INT(wait_receipt(d.session, r3, FERRY_RECEIPT_ACKNOWLEDGED, NULL), FERRY_RECEIPT_ACKNOWLEDGED);
  struct receipt_waiter got;
  CHECK_EQ_INT(wait_receipt(d.session, r2, FERRY_RECEIPT_ACKNOWLEDGED, &got), FERRY_RECEIPT_REJECTED);
  CHECK_EQ_INT(got.writes, 1);
  CHECK_STREQ(got.object_type, "Item");
  CHECK_VALUE(got.primary_key, bad);
  char hex[25], reason[256];
  for (int i = 0; i < 12; i++) snprintf(hex + 2 * i, 3, "%02x", bad.u.object_id[i]);
  snprintf(reason, sizeof reason, "write to \"%s\" in table \"Item\" not allowed; object is outside of the current query view", hex);
  CHECK_STREQ(got.reason, reason);
  CHECK_EQ_INT(receipt_state(d.db, r1), FERRY_RECEIPT_ACKNOWLEDGED);
  CHECK_EQ_INT(receipt_state(d.db, r2), FERRY_RECEIPT_REJECTED);
  /* a wait for a state already passed completes at once, on the loop thread */
  CHECK_EQ_INT(wait_receipt(d.session, r1, FERRY_RECEIPT_LOCAL, NULL), FERRY_RECEIPT_ACKNOWLEDGED);
  /* the session's end fails a pending wait: FERRY_ERR_CLOSED */
  CHECK_OK(ferry_sync_suspend(d.session));
  uint64_t r4 = create_item_receipt(d.db, new_oid(), d.user_id, 3);
  struct receipt_waiter *w = receipt_waiter_new();
  CHECK_OK(ferry_sync_wait_for_receipt(d.session, r4, FERRY_RECEIPT_ACKNOWLEDGED, on_receipt, w));
  ferry_sync_session_free(d.session);
  d.session = NULL;
  CHECK_EQ_INT(w->calls, 1); /* the free waits for the loop: the callback already ran */
  CHECK_EQ_INT(w->code, FERRY_ERR_CLOSED);
  receipt_waiter_free(w);
  device_stop(&d);
}

static void test_restart(void) {
  struct device_handles d;
  device_start(&d, "restart");
  CHECK_OK(ferry_sync_suspend(d.session));
  uint64_t r = create_item_receipt(d.db, new_oid(), d.user_id, 1);
  CHECK_EQ_INT(receipt_state(d.db, r), FERRY_RECEIPT_LOCAL);
  device_stop(&d);

  /* the next run: a new App on the same directory, its cached user, the same file */
  ferry_app_options_t o = app_options(d.dir, base_url);
  d.app = app_new_with(&o);
  CHECK_OK(ferry_app_current_user(&d.user, d.app));
  CHECK(d.user != NULL);
  open_session(&d);
  int32_t before = receipt_state(d.db, r);
  CHECKF(before == FERRY_RECEIPT_LOCAL || before == FERRY_RECEIPT_UPLOADED || before == FERRY_RECEIPT_ACKNOWLEDGED,
         "after the restart receipt %llu reads %d", (unsigned long long)r, before);
  CHECK_EQ_INT(wait_receipt(d.session, r, FERRY_RECEIPT_ACKNOWLEDGED, NULL), FERRY_RECEIPT_ACKNOWLEDGED);
  device_stop(&d);
}

int main(void) {
  /* SIGPIPE keeps its default action: a server closing a socket must not kill the host. */
  make_item_schema();
  test_local_receipts();
  if (!server_start()) {
    printf("test_receipts: server part SKIPPED: %s\n", server_skip_reason);
    ferry_schema_free(item_schema);
    int rc = check_done("test_receipts");
    return rc != 0 ? rc : 77;
  }
  printf("test_receipts: ferry-server at %s\n", base_url);
  fflush(stdout);
  note_main_thread();
  test_states_and_rejection();
  test_restart();
  ferry_schema_free(item_schema);
  server_stop();
  return check_done("test_receipts");
}
