/*
 * test_precheck.c — the pre-flight check (SPEC F-PRECHECK) through the C API, against a real
 * ferry-server started as a subprocess (sync_server.h). The server publishes the user's write
 * rules after each BIND; the device checks every commit before upload:
 *
 *  - WARN: the seeds' complexity-7 and wrong-owner writes commit, and the precheck callback
 *    gets each with the seeds' exact reason at once (inside ferry_db_commit), offline (the
 *    session suspended);
 *  - STRICT: the same writes fail with FERRY_ERR_WRITE_REJECTED (ferry_error_last names the
 *    reason), nothing is written, the callback gets them with committed false; legal writes pass;
 *  - the rules live in the file: a new App with no server reachable refuses the wrong owner;
 *  - an unknown precheck_mode is FERRY_ERR_INVALID_ARGUMENT; a version-3 options struct opens
 *    with the check off.
 *
 * The callback runs on the committing thread (the test's own), so it is read without waiting.
 * Exits 77 (CTest: skipped) when the server binary does not exist.
 */
#include "check.h"
#include "sync_server.h"
#include "sync_waiters.h"

#include <signal.h>

struct error_log {
  int unused;
};

#define MAX_FINDINGS 8

struct findings {
  int count;
  size_t writes[MAX_FINDINGS];
  bool committed[MAX_FINDINGS];
  char object_type[MAX_FINDINGS][64];
  char reason[MAX_FINDINGS][512];
  ferry_value_t primary_key[MAX_FINDINGS]; /* ObjectIds: copied by value */
};

static void on_precheck(void *userdata, const ferry_compensating_write_t *writes, size_t count, bool committed) {
  struct findings *f = userdata;
  if (f->count >= MAX_FINDINGS) return;
  int i = f->count++;
  f->writes[i] = count;
  f->committed[i] = committed;
  if (count > 0 && writes != NULL) {
    snprintf(f->object_type[i], sizeof f->object_type[i], "%s", writes[0].object_type);
    snprintf(f->reason[i], sizeof f->reason[i], "%s", writes[0].reason);
    f->primary_key[i] = writes[0].primary_key;
  }
}

static void reason_for(char *out, size_t size, ferry_value_t id, const char *tail) {
  char hex[25];
  oid_hex(hex, &id);
  snprintf(out, size, "write to \"%s\" in table \"Item\" %s", hex, tail);
}

#define OUTSIDE "not allowed; object is outside of the current query view"
#define DENIED "was denied by write filter in role \"owner-read-write\""
#define WRONG_OWNER "This string does not match the user.id"

static int create_item(ferry_db_t *db, ferry_value_t id, const char *owner, int64_t complexity) {
  CHECK_OK(ferry_db_begin_write(db));
  ferry_property_value_t vals[] = {pv(P_ID, id), pv(P_OWNER, v_str(owner)), pv(P_NAME, v_str("item")),
                                   pv(P_COMPLEXITY, v_int(complexity))};
  CHECK_OK(ferry_object_create(db, 0, vals, 4));
  return ferry_db_commit(db);
}

static bool has_item(ferry_db_t *db, ferry_value_t id) {
  ferry_object_t *o = NULL;
  int rc = ferry_object_get(&o, db, 0, &id);
  ferry_object_free(o);
  return rc == FERRY_OK;
}

static void check_finding(const struct findings *f, int i, ferry_value_t id, const char *tail, bool committed) {
  char want[512];
  reason_for(want, sizeof want, id, tail);
  CHECK_EQ_INT(f->writes[i], 1);
  CHECK(f->committed[i] == committed);
  CHECK_STREQ(f->object_type[i], "Item");
  CHECK_VALUE(f->primary_key[i], id);
  CHECK_STREQ(f->reason[i], want);
}

/* Opens d's file with a check, subscribes to complexity <= 4 online (the rules arrive after
 * BIND, before the subscription completes), then suspends the session: offline from here. */
static void open_checked(struct device *d, int32_t mode, struct findings *f) {
  ferry_sync_options_t so = sync_options(d->db_path);
  so.precheck_mode = mode;
  so.precheck_callback = on_precheck;
  so.precheck_userdata = f;
  CHECK_OK(ferry_sync_open(&d->session, &d->db, d->user, &so));
  CHECK_OUTCOME_OK(wait_download(d->session), "the first download");
  CHECK_OUTCOME_OK(add_subscription(d->session, "items", "complexity <= 4", NULL), "subscribe");
  CHECK_OK(ferry_sync_suspend(d->session));
}

static void test_warn(void) {
  struct device d;
  device_dirs(&d, "warn", NULL);
  ferry_app_options_t o = app_options(d.dir, base_url);
  d.app = app_new_with(&o);
  device_login(&d, anonymous, false);
  struct findings f = {0};
  open_checked(&d, FERRY_PRECHECK_WARN, &f);

  ferry_value_t complex = new_oid(), foreign = new_oid(), fine = new_oid();
  CHECK_OK(create_item(d.db, complex, d.user_id, 7));
  CHECK_EQ_INT(f.count, 1); /* at once, inside the commit */
  check_finding(&f, 0, complex, OUTSIDE, true);
  CHECK_OK(create_item(d.db, foreign, WRONG_OWNER, 1));
  CHECK_EQ_INT(f.count, 2);
  check_finding(&f, 1, foreign, DENIED, true);
  CHECK_OK(create_item(d.db, fine, d.user_id, 2));
  CHECK_EQ_INT(f.count, 2);
  CHECK(has_item(d.db, complex) && has_item(d.db, foreign) && has_item(d.db, fine));
  device_free_handles(&d);
}

static void test_strict_and_restart(void) {
  struct device d;
  device_dirs(&d, "strict", NULL);
  ferry_app_options_t o = app_options(d.dir, base_url);
  d.app = app_new_with(&o);
  device_login(&d, anonymous, false);
  struct findings f = {0};
  open_checked(&d, FERRY_PRECHECK_STRICT, &f);

  ferry_value_t complex = new_oid(), foreign = new_oid(), fine = new_oid();
  char want[512];
  CHECK_ERR(create_item(d.db, complex, d.user_id, 7), FERRY_ERR_WRITE_REJECTED);
  reason_for(want, sizeof want, complex, OUTSIDE);
  CHECKF(strstr(ferry_error_last()->message, want) != NULL, "the error does not give the reason: %s", ferry_error_last()->message);
  bool in_tx = true;
  CHECK_OK(ferry_db_is_in_transaction(&in_tx, d.db));
  CHECK(!in_tx);
  CHECK_ERR(create_item(d.db, foreign, WRONG_OWNER, 1), FERRY_ERR_WRITE_REJECTED);
  CHECK_EQ_INT(f.count, 2);
  check_finding(&f, 0, complex, OUTSIDE, false);
  check_finding(&f, 1, foreign, DENIED, false);
  CHECK(!has_item(d.db, complex));
  CHECK(!has_item(d.db, foreign));
  CHECK_OK(create_item(d.db, fine, d.user_id, 2));
  CHECK_EQ_INT(count_items(d.db), 1);
  CHECK_EQ_INT(f.count, 2);

  /* Restart with no server: a new App on the same directory (the cached user) and the rules
   * kept in the file. */
  char dir[640];
  snprintf(dir, sizeof dir, "%s", d.dir);
  device_free_handles(&d);
  struct device r;
  device_dirs(&r, "restart", dir);
  ferry_app_options_t ro = app_options(r.dir, "http://127.0.0.1:9");
  r.app = app_new_with(&ro);
  CHECK_OK(ferry_app_current_user(&r.user, r.app));
  CHECK(r.user != NULL);
  struct findings g = {0};
  ferry_sync_options_t so = sync_options(r.db_path);
  so.precheck_mode = FERRY_PRECHECK_STRICT;
  so.precheck_callback = on_precheck;
  so.precheck_userdata = &g;
  CHECK_OK(ferry_sync_open(&r.session, &r.db, r.user, &so));
  ferry_value_t other = new_oid();
  CHECK_ERR(create_item(r.db, other, WRONG_OWNER, 1), FERRY_ERR_WRITE_REJECTED);
  CHECK_EQ_INT(g.count, 1);
  check_finding(&g, 0, other, DENIED, false);
  device_free_handles(&r);
}

static void test_options(void) {
  struct device d;
  device_dirs(&d, "options", NULL);
  ferry_app_options_t o = app_options(d.dir, base_url);
  d.app = app_new_with(&o);
  device_login(&d, anonymous, false);
  ferry_sync_options_t so = sync_options(d.db_path);
  CHECK_EQ_INT(so.precheck_mode, FERRY_PRECHECK_OFF);
  CHECK(so.precheck_callback == NULL);
  so.precheck_mode = 3;
  CHECK_ERR(ferry_sync_open(&d.session, &d.db, d.user, &so), FERRY_ERR_INVALID_ARGUMENT);
  /* A host built against version 3: the fields after it are not read (garbage there). */
  ferry_sync_options_t v3;
  memset(&v3, 0xab, sizeof v3);
  CHECK_OK(ferry_sync_options_init(&v3, 3));
  v3.path = d.db_path;
  v3.schema = item_schema;
  v3.initial_subscriptions = NULL;
  v3.before_reset = NULL;
  v3.after_reset = NULL;
  CHECK_OK(ferry_sync_open(&d.session, &d.db, d.user, &v3));
  ferry_value_t complex = new_oid();
  CHECK_OK(create_item(d.db, complex, d.user_id, 7)); /* no check */
  device_free_handles(&d);
}

int main(void) {
  /* SIGPIPE keeps its default action: a server closing a socket must not kill the host. */
  if (!server_start()) {
    printf("test_precheck: SKIPPED: %s\n", server_skip_reason);
    return 77;
  }
  make_item_schema();
  test_warn();
  test_strict_and_restart();
  test_options();
  ferry_schema_free(item_schema);
  server_stop();
  return check_done("test_precheck");
}
