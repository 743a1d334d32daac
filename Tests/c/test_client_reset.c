/*
 * test_client_reset.c — client reset through the C API (SPEC F-RESET, F-RESETMODES,
 * F-RECOVERY, F-RESETMANUAL) against a real ferry-server (sync_server.h). The server's admin API
 * terminates sync and enables it again: the server takes a new identity and forgets every
 * client file, so each device's next bind is refused with a client-reset error (208) and its
 * session does what its client_reset_mode says.
 *
 * Each scenario has two devices of one user (A and B, one App each), both subscribed to the
 * user's items. A writes while paused (its unsynced changes), B changes some of the same objects
 * and uploads, the admin resets the server, A resumes:
 *  - RECOVER_UNSYNCED_CHANGES: the error handler gets a non-fatal CLIENT_RESET error whose
 *    report lists the four objects A touched with the seeds' rules (created here: synced;
 *    updated here and deleted on the server: discarded; deleted here: deleted; updated on both:
 *    A's fields win); both devices converge on that. The before callback gets a read-only lent
 *    handle on the old state (writes and ferry_db_close refused, ferry_db_write_copy works: the
 *    copy opens and holds the unsynced object); the after callback gets the same report as the
 *    handler and the reset database; the lent handles are dead after their call;
 *  - DISCARD_UNSYNCED_CHANGES: A becomes the server's state, its changes are gone and the
 *    report says so (recovered false, every entry DISCARDED);
 *  - MANUAL: the handler gets a fatal error with a backup path and a token and nothing changes;
 *    ferry_app_handle_client_reset refuses while the file is open, moves it aside once closed
 *    (the backup opens as an ordinary database with the unsynced object), and the next open
 *    downloads the server's state; a second call finds nothing pending (FERRY_ERR_NOT_FOUND);
 *  - MANUAL never performed by the host: the reset happens at the file's next open.
 *
 * Callbacks run on Ferry's loop thread; the test records what they saw under a lock and checks
 * it on the main thread, waiting with deadlines (never a sleep). Exits 77 (CTest: skipped)
 * without a ferry-server binary.
 */
#include "check.h"
#include "sync_server.h"
#include "sync_waiters.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>

/* ---- what a reset report said (copied: the C report is lent for the callback) ----------------- */

struct copied_entry {
  char object_type[32];
  ferry_value_t key; /* an ObjectId: its bytes live in the value */
  int32_t outcome;
  char reason[256];
};

struct copied_report {
  bool present;
  bool recovered;
  size_t unsynced_changesets;
  size_t count;
  struct copied_entry entries[16];
};

static void copy_report(struct copied_report *out, const ferry_client_reset_report_t *r) {
  memset(out, 0, sizeof *out);
  out->present = true;
  out->recovered = r->recovered;
  out->unsynced_changesets = r->unsynced_changesets;
  out->count = r->entries_count;
  for (size_t i = 0; i < r->entries_count && i < 16; i++) {
    const ferry_client_reset_entry_t *e = &r->entries[i];
    snprintf(out->entries[i].object_type, sizeof out->entries[i].object_type, "%s", e->object_type);
    out->entries[i].key = e->primary_key; /* ObjectIds are copied by value */
    out->entries[i].outcome = e->outcome;
    snprintf(out->entries[i].reason, sizeof out->entries[i].reason, "%s", e->reason);
  }
}

static const struct copied_entry *entry_for(const struct copied_report *r, ferry_value_t key) {
  for (size_t i = 0; i < r->count && i < 16; i++)
    if (r->entries[i].key.type == FERRY_TYPE_OBJECT_ID && memcmp(r->entries[i].key.u.object_id, key.u.object_id, 12) == 0)
      return &r->entries[i];
  return NULL;
}

static bool same_report(const struct copied_report *a, const struct copied_report *b) {
  if (a->present != b->present || a->recovered != b->recovered || a->count != b->count ||
      a->unsynced_changesets != b->unsynced_changesets)
    return false;
  for (size_t i = 0; i < a->count && i < 16; i++) {
    const struct copied_entry *x = &a->entries[i], *y = entry_for(b, x->key);
    if (y == NULL || x->outcome != y->outcome || strcmp(x->reason, y->reason) != 0 || strcmp(x->object_type, y->object_type) != 0)
      return false;
  }
  return true;
}

/* ---- the sync error handler ------------------------------------------------------------------- */

struct error_log {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int frees;
  int resets;             /* errors about a client reset: a report, or a token */
  bool fatal;             /* of the last of them */
  int32_t code, action;
  struct copied_report report;
  char backup[700], token[700];
  int others;             /* any other error */
  char other[512];
};

static void on_sync_error(void *userdata, ferry_sync_session_t *session, const ferry_sync_error_t *e) {
  (void)session;
  struct error_log *l = userdata;
  pthread_mutex_lock(&l->mu);
  if (e->client_reset_report != NULL || e->client_reset_token != NULL) {
    l->resets++;
    l->fatal = e->is_fatal;
    l->code = e->code;
    l->action = e->action;
    if (e->client_reset_report) copy_report(&l->report, e->client_reset_report);
    snprintf(l->backup, sizeof l->backup, "%s", e->client_reset_backup_path ? e->client_reset_backup_path : "");
    snprintf(l->token, sizeof l->token, "%s", e->client_reset_token ? e->client_reset_token : "");
  } else if (e->code != 208) { /* the 208 itself is reported by the reset's own error */
    if (l->others++ == 0) snprintf(l->other, sizeof l->other, "%d %s", e->code, e->message ? e->message : "(NULL)");
  }
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static void on_error_log_free(void *userdata) {
  struct error_log *l = userdata;
  pthread_mutex_lock(&l->mu);
  l->frees++;
  pthread_mutex_unlock(&l->mu);
}

/* Waits until the handler heard of a reset; false after WAIT_SECONDS. */
static bool wait_reset_error(struct error_log *l) {
  struct timespec deadline = deadline_in(WAIT_SECONDS);
  pthread_mutex_lock(&l->mu);
  int rc = 0;
  while (l->resets == 0 && rc == 0) rc = pthread_cond_timedwait(&l->cv, &l->mu, &deadline);
  bool got = l->resets > 0;
  pthread_mutex_unlock(&l->mu);
  return got;
}

static bool has_item_in(ferry_db_t *db, ferry_value_t id) {
  ferry_object_t *o = NULL;
  int rc = ferry_object_get(&o, db, 0, &id);
  if (rc == FERRY_ERR_NOT_FOUND) return false;
  CHECK_OK(rc);
  ferry_object_free(o);
  return true;
}

#define CHECK_EQ_STR(a, b) CHECKF(strcmp((a), (b)) == 0, "%s is \"%s\", expected \"%s\"", #a, (a), (b))

/* ---- the reset callbacks ---------------------------------------------------------------------- */

struct callbacks_log {
  pthread_mutex_t mu;
  int before_calls, after_calls, on_main_thread;
  ferry_value_t unsynced; /* the object A created while paused */
  char copy_path[700];
  int copy_rc, begin_write_rc, close_rc;
  size_t before_items, after_before_items, after_items;
  bool before_has_unsynced, after_has_unsynced, freed_before_still_usable;
  ferry_db_t *lent_before, *lent_after;
  struct copied_report report;
};

static void on_before_reset(void *userdata, ferry_db_t *before) {
  struct callbacks_log *c = userdata;
  pthread_mutex_lock(&c->mu);
  c->before_calls++;
  if (on_main_thread_now()) c->on_main_thread++;
  c->lent_before = before;
  c->before_items = count_items(before);
  c->before_has_unsynced = has_item_in(before, c->unsynced);
  c->begin_write_rc = ferry_db_begin_write(before); /* read-only: refused */
  c->close_rc = ferry_db_close(before);             /* lent: refused */
  c->copy_rc = ferry_db_write_copy(before, c->copy_path);
  pthread_mutex_unlock(&c->mu);
}

static void on_after_reset(void *userdata, ferry_db_t *before, ferry_db_t *after, const ferry_client_reset_report_t *report) {
  struct callbacks_log *c = userdata;
  pthread_mutex_lock(&c->mu);
  c->after_calls++;
  if (on_main_thread_now()) c->on_main_thread++;
  c->lent_after = after;
  c->after_before_items = count_items(before);
  c->after_items = count_items(after);
  c->after_has_unsynced = has_item_in(after, c->unsynced);
  copy_report(&c->report, report);
  ferry_db_free(before); /* not the host's: a no-op */
  size_t n = 0;
  c->freed_before_still_usable = ferry_db_class_count(&n, before) == FERRY_OK && n == 1;
  pthread_mutex_unlock(&c->mu);
}

/* ---- devices ------------------------------------------------------------------------------------ */

/* A device of the user with credentials c: an App (fast retries) with the error log. */
static void device_start(struct device *d, const char *name, ferry_credentials_t c, bool do_register) {
  device_dirs(d, name, NULL);
  ferry_app_options_t o = app_options(d->dir, base_url);
  o.reconnect_delay_min_ms = 50;
  o.reconnect_delay_max_ms = 200;
  d->app = app_new_with(&o);
  d->errors = calloc(1, sizeof *d->errors);
  CHECK(d->errors != NULL);
  pthread_mutex_init(&d->errors->mu, NULL);
  cond_init_monotonic(&d->errors->cv);
  CHECK_OK(ferry_app_set_sync_error_handler(d->app, on_sync_error, d->errors, on_error_log_free));
  device_login(d, c, do_register);
}

/* Opens the device's file with `so` (its path set here) and subscribes to the user's items. */
static void device_open_subscribed(struct device *d, ferry_sync_options_t so) {
  so.path = d->db_path;
  CHECK_OK(ferry_sync_open(&d->session, &d->db, d->user, &so));
  CHECK_OUTCOME_OK(wait_download(d->session), "download before subscribing");
  char query[256];
  snprintf(query, sizeof query, "ownerId == '%s'", d->user_id);
  CHECK_OUTCOME_OK(add_subscription(d->session, "mine", query, NULL), "subscribe");
}

static void device_stop(struct device *d) {
  device_free_handles(d);
  CHECK_EQ_INT(d->errors->frees, 1);
  pthread_mutex_destroy(&d->errors->mu);
  pthread_cond_destroy(&d->errors->cv);
  free(d->errors);
  memset(d, 0, sizeof *d);
}

static void create_item(ferry_db_t *db, ferry_value_t id, const char *owner, const char *name, int64_t complexity) {
  ferry_property_value_t vals[] = {pv(P_ID, id), pv(P_OWNER, v_str(owner)), pv(P_NAME, v_str(name)), pv(P_COMPLEXITY, v_int(complexity))};
  CHECK_OK(ferry_object_create(db, 0, vals, 4));
}

static void set_name(ferry_db_t *db, ferry_value_t id, const char *name) {
  ferry_value_t v = v_str(name);
  CHECK_OK(ferry_object_set(db, 0, &id, P_NAME, &v));
}

/* The item's name ("" when there is no such item). */
static void item_name(char *out, size_t size, ferry_db_t *db, ferry_value_t id) {
  out[0] = '\0';
  ferry_object_t *o = NULL;
  int rc = ferry_object_get(&o, db, 0, &id);
  if (rc == FERRY_ERR_NOT_FOUND) return;
  CHECK_OK(rc);
  ferry_value_t v;
  CHECK_OK(ferry_object_get_value(&v, o, P_NAME));
  CHECK(v.type == FERRY_TYPE_STRING);
  snprintf(out, size, "%.*s", (int)v.u.string.size, v.u.string.data);
  ferry_object_free(o);
}

/* The two devices of one new user, and A's four objects of the recipe: ids[0..2] synced to
 * both; then, with A paused, A creates ids[3], renames ids[0], changes ids[1]'s complexity and
 * deletes ids[2], while B renames ids[0] and deletes ids[1] and uploads that. Then the admin
 * resets the server's sync and A resumes. */
struct pair {
  struct device a, b;
  ferry_value_t ids[4];
};

/* cb (may be NULL) learns which object A creates while paused, before any reset. */
static void pair_run(struct pair *p, const char *who, ferry_sync_options_t a_options, struct callbacks_log *cb) {
  memset(p, 0, sizeof *p);
  char email[128];
  random_email(email, sizeof email, who);
  ferry_credentials_t c = email_credentials(email, "a-password-for-reset-tests");
  device_start(&p->a, "a", c, true);
  device_start(&p->b, "b", c, false);
  device_open_subscribed(&p->a, a_options);
  device_open_subscribed(&p->b, sync_options(NULL));
  for (int i = 0; i < 4; i++) p->ids[i] = new_oid();
  if (cb) {
    pthread_mutex_lock(&cb->mu);
    cb->unsynced = p->ids[3];
    pthread_mutex_unlock(&cb->mu);
  }

  CHECK_OK(ferry_db_begin_write(p->a.db));
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "item %d", i);
    create_item(p->a.db, p->ids[i], p->a.user_id, name, i);
  }
  CHECK_OK(ferry_db_commit(p->a.db));
  CHECK_OUTCOME_OK(wait_upload(p->a.session), "A uploads its items");
  CHECK_OUTCOME_OK(wait_download(p->b.session), "B downloads them");
  CHECK_EQ_INT(count_items(p->b.db), 3);

  CHECK_OK(ferry_sync_suspend(p->a.session));
  CHECK_OK(ferry_db_begin_write(p->a.db));
  create_item(p->a.db, p->ids[3], p->a.user_id, "new on a", 1);
  set_name(p->a.db, p->ids[0], "renamed on a");
  ferry_value_t four = v_int(4);
  CHECK_OK(ferry_object_set(p->a.db, 0, &p->ids[1], P_COMPLEXITY, &four));
  CHECK_OK(ferry_object_delete(p->a.db, 0, &p->ids[2]));
  CHECK_OK(ferry_db_commit(p->a.db));
  CHECK_OK(ferry_db_begin_write(p->b.db));
  set_name(p->b.db, p->ids[0], "renamed on b");
  CHECK_OK(ferry_object_delete(p->b.db, 0, &p->ids[1]));
  CHECK_OK(ferry_db_commit(p->b.db));
  CHECK_OUTCOME_OK(wait_upload(p->b.session), "B uploads its changes");

  CHECK_EQ_INT(server_admin_post("sync/terminate"), 200);
  CHECK_EQ_INT(server_admin_post("sync/enable"), 200);
  CHECK_OK(ferry_sync_resume(p->a.session));
  CHECKF(wait_reset_error(p->a.errors), "%s: A's error handler heard of no client reset within %d s", who, WAIT_SECONDS);
}

static void pair_stop(struct pair *p) {
  pthread_mutex_lock(&p->a.errors->mu);
  CHECKF(p->a.errors->others == 0, "device A: %d other sync errors (first: %s)", p->a.errors->others, p->a.errors->other);
  pthread_mutex_unlock(&p->a.errors->mu);
  device_stop(&p->a);
  device_stop(&p->b);
}

/* ---- the scenarios ------------------------------------------------------------------------------- */

static void test_recover(void) {
  printf("recover unsynced changes: the rules, the report, the before and after callbacks\n");
  static struct callbacks_log cb;
  memset(&cb, 0, sizeof cb);
  pthread_mutex_init(&cb.mu, NULL);
  snprintf(cb.copy_path, sizeof cb.copy_path, "%s", test_path("before-reset-copy.ferry"));
  ferry_sync_options_t so = sync_options(NULL);
  so.client_reset_mode = FERRY_CLIENT_RESET_RECOVER_UNSYNCED_CHANGES;
  so.before_reset = on_before_reset;
  so.before_reset_userdata = &cb;
  so.after_reset = on_after_reset;
  so.after_reset_userdata = &cb;
  static struct pair p;
  pair_run(&p, "reset-recover", so, &cb);

  struct error_log *l = p.a.errors;
  pthread_mutex_lock(&l->mu);
  CHECK(!l->fatal);
  CHECK_EQ_INT(l->action, FERRY_SYNC_ACTION_CLIENT_RESET);
  CHECK_EQ_INT(l->code, 208); /* the server's error, no longer fatal */
  CHECK(l->report.present && l->report.recovered);
  CHECK(l->backup[0] == '\0' && l->token[0] == '\0');
  CHECK_EQ_INT(l->report.count, 4);
  CHECK(l->report.unsynced_changesets >= 1);
  const struct copied_entry *e3 = entry_for(&l->report, p.ids[3]), *e0 = entry_for(&l->report, p.ids[0]);
  const struct copied_entry *e1 = entry_for(&l->report, p.ids[1]), *e2 = entry_for(&l->report, p.ids[2]);
  CHECK(e0 && e1 && e2 && e3);
  CHECK_EQ_STR(e3->reason, "created on this device and not yet synced");
  CHECK_EQ_INT(e3->outcome, FERRY_CLIENT_RESET_RECOVERED);
  CHECK_EQ_STR(e0->reason, "the device's updates applied over the server's: itemName");
  CHECK_EQ_INT(e0->outcome, FERRY_CLIENT_RESET_RECOVERED);
  CHECK_EQ_STR(e1->reason, "deleted on the server: the device's updates to it are discarded");
  CHECK_EQ_INT(e1->outcome, FERRY_CLIENT_RESET_DISCARDED);
  CHECK_EQ_STR(e2->reason, "deleted on this device");
  CHECK_EQ_INT(e2->outcome, FERRY_CLIENT_RESET_RECOVERED);
  CHECK_EQ_STR(e0->object_type, "Item");
  pthread_mutex_unlock(&l->mu);

  /* the callbacks: once each, on the loop thread, before = the old state, after = the reset */
  pthread_mutex_lock(&cb.mu);
  CHECK_EQ_INT(cb.before_calls, 1);
  CHECK_EQ_INT(cb.after_calls, 1);
  CHECK_EQ_INT(cb.on_main_thread, 0);
  CHECK_EQ_INT(cb.before_items, 3); /* ids 0, 1, 3: A deleted 2 */
  CHECK(cb.before_has_unsynced);
  CHECK_EQ_INT(cb.begin_write_rc, FERRY_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(cb.close_rc, FERRY_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(cb.copy_rc, FERRY_OK);
  CHECK_EQ_INT(cb.after_before_items, 3);
  CHECK_EQ_INT(cb.after_items, 2); /* ids 0 and 3: 1 deleted on the server, 2 on A */
  CHECK(cb.after_has_unsynced);
  CHECK(cb.freed_before_still_usable);
  CHECKF(same_report(&cb.report, &l->report), "the after callback's report differs from the error handler's");
  /* lent handles are dead after their call */
  size_t n = 0;
  CHECK_ERR(ferry_db_class_count(&n, cb.lent_before), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_db_class_count(&n, cb.lent_after), FERRY_ERR_INVALID_HANDLE);
  pthread_mutex_unlock(&cb.mu);
  /* the copy made in the before callback is an ordinary database with the old state */
  ferry_db_t *copy = NULL;
  CHECK_OK(db_open_path(&copy, cb.copy_path, NULL, FERRY_DELIVERY_POLL, false));
  CHECK(has_item_in(copy, p.ids[3]));
  CHECK(!has_item_in(copy, p.ids[2]));
  ferry_db_free(copy);

  /* both devices converge on the recovered state, and A syncs on as the new client file */
  CHECK_OUTCOME_OK(wait_upload(p.a.session), "A uploads what it recovered");
  CHECK_OUTCOME_OK(wait_download(p.a.session), "A downloads");
  CHECK_OUTCOME_OK(wait_download(p.b.session), "B downloads");
  struct device *devices[] = {&p.a, &p.b};
  for (int i = 0; i < 2; i++) {
    char name[64];
    item_name(name, sizeof name, devices[i]->db, p.ids[0]);
    CHECK_EQ_STR(name, "renamed on a");
    CHECK(!has_item_in(devices[i]->db, p.ids[1]));
    CHECK(!has_item_in(devices[i]->db, p.ids[2]));
    CHECK(has_item_in(devices[i]->db, p.ids[3]));
  }
  ferry_value_t later = new_oid();
  CHECK_OK(ferry_db_begin_write(p.a.db));
  create_item(p.a.db, later, p.a.user_id, "after the reset", 0);
  CHECK_OK(ferry_db_commit(p.a.db));
  CHECK_OUTCOME_OK(wait_upload(p.a.session), "A uploads after the reset");
  CHECK_OUTCOME_OK(wait_download(p.b.session), "B downloads it");
  CHECK(has_item_in(p.b.db, later));
  int32_t state = -1;
  CHECK_OK(ferry_sync_session_state(&state, p.a.session));
  CHECK_EQ_INT(state, FERRY_SESSION_ACTIVE);
  pair_stop(&p);
  pthread_mutex_destroy(&cb.mu);
}

static void test_discard(void) {
  printf("discard unsynced changes: the server's state, the report lists what was dropped\n");
  ferry_sync_options_t so = sync_options(NULL);
  so.client_reset_mode = FERRY_CLIENT_RESET_DISCARD_UNSYNCED_CHANGES;
  static struct pair p;
  pair_run(&p, "reset-discard", so, NULL);
  struct error_log *l = p.a.errors;
  pthread_mutex_lock(&l->mu);
  CHECK(!l->fatal);
  CHECK_EQ_INT(l->action, FERRY_SYNC_ACTION_CLIENT_RESET);
  CHECK(l->report.present && !l->report.recovered);
  CHECK_EQ_INT(l->report.count, 4);
  for (size_t i = 0; i < l->report.count; i++) CHECK_EQ_INT(l->report.entries[i].outcome, FERRY_CLIENT_RESET_DISCARDED);
  pthread_mutex_unlock(&l->mu);
  /* A is the server's state: B's rename, B's delete, nothing of A's changes */
  CHECK_OUTCOME_OK(wait_upload(p.a.session), "A after the reset");
  CHECK_OUTCOME_OK(wait_download(p.a.session), "A downloads");
  char name[64];
  item_name(name, sizeof name, p.a.db, p.ids[0]);
  CHECK_EQ_STR(name, "renamed on b");
  CHECK(!has_item_in(p.a.db, p.ids[1]));
  CHECK(has_item_in(p.a.db, p.ids[2]));
  CHECK(!has_item_in(p.a.db, p.ids[3]));
  CHECK_OUTCOME_OK(wait_download(p.b.session), "B downloads");
  CHECK(!has_item_in(p.b.db, p.ids[3]));
  CHECK(has_item_in(p.b.db, p.ids[2]));
  pair_stop(&p);
}

static void test_manual(void) {
  printf("manual: the handler gets a backup path and a token; ferry_app_handle_client_reset\n");
  ferry_sync_options_t so = sync_options(NULL);
  so.client_reset_mode = FERRY_CLIENT_RESET_MANUAL;
  static struct pair p;
  pair_run(&p, "reset-manual", so, NULL);
  struct error_log *l = p.a.errors;
  char token[700], backup[700];
  pthread_mutex_lock(&l->mu);
  CHECK(l->fatal);
  CHECK_EQ_INT(l->code, 208);
  CHECK_EQ_INT(l->action, FERRY_SYNC_ACTION_CLIENT_RESET);
  CHECK(!l->report.present);
  snprintf(token, sizeof token, "%s", l->token);
  snprintf(backup, sizeof backup, "%s", l->backup);
  pthread_mutex_unlock(&l->mu);
  CHECK(token[0] != '\0' && backup[0] != '\0');
  CHECK_EQ_STR(token, p.a.db_path);
  /* nothing changed yet, and the session stopped */
  int32_t state = -1;
  CHECK_OK(ferry_sync_session_state(&state, p.a.session));
  CHECK_EQ_INT(state, FERRY_SESSION_INACTIVE);
  CHECK(has_item_in(p.a.db, p.ids[3]));
  /* refused while the file is open; done once it is closed; then nothing is pending */
  CHECK_ERR(ferry_app_handle_client_reset(p.a.app, token), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(has_item_in(p.a.db, p.ids[3]));
  ferry_sync_session_free(p.a.session);
  p.a.session = NULL;
  CHECK_ERR(ferry_app_handle_client_reset(p.a.app, token), FERRY_ERR_INVALID_ARGUMENT); /* the db handle is open */
  ferry_db_free(p.a.db);
  p.a.db = NULL;
  CHECK_OK(ferry_app_handle_client_reset(p.a.app, token));
  struct stat st;
  CHECK(stat(p.a.db_path, &st) != 0);
  CHECK_ERR(ferry_app_handle_client_reset(p.a.app, token), FERRY_ERR_NOT_FOUND);
  /* the backup is an ordinary database with the device's data as it was */
  ferry_db_t *old = NULL;
  CHECK_OK(db_open_path(&old, backup, NULL, FERRY_DELIVERY_POLL, false));
  CHECK(has_item_in(old, p.ids[3]));
  char name[64];
  item_name(name, sizeof name, old, p.ids[0]);
  CHECK_EQ_STR(name, "renamed on a");
  ferry_db_free(old);
  /* the next open downloads the server's state */
  device_open_subscribed(&p.a, sync_options(NULL));
  CHECK_OUTCOME_OK(wait_download(p.a.session), "A downloads a fresh copy");
  CHECK(!has_item_in(p.a.db, p.ids[3]));
  CHECK(has_item_in(p.a.db, p.ids[2]));
  item_name(name, sizeof name, p.a.db, p.ids[0]);
  CHECK_EQ_STR(name, "renamed on b");
  pair_stop(&p);
}

static void test_manual_at_next_open(void) {
  printf("manual, never performed by the host: the reset happens at the next open\n");
  ferry_sync_options_t so = sync_options(NULL);
  so.client_reset_mode = FERRY_CLIENT_RESET_MANUAL;
  static struct pair p;
  pair_run(&p, "reset-manual-later", so, NULL);
  char backup[700];
  pthread_mutex_lock(&p.a.errors->mu);
  snprintf(backup, sizeof backup, "%s", p.a.errors->backup);
  pthread_mutex_unlock(&p.a.errors->mu);
  CHECK(backup[0] != '\0');
  ferry_sync_session_free(p.a.session);
  ferry_db_free(p.a.db);
  p.a.session = NULL;
  p.a.db = NULL;
  ferry_sync_options_t again = sync_options(p.a.db_path);
  CHECK_OK(ferry_sync_open(&p.a.session, &p.a.db, p.a.user, &again));
  struct stat st;
  CHECK(stat(backup, &st) == 0);
  CHECK(!has_item_in(p.a.db, p.ids[3]));
  CHECK_OUTCOME_OK(wait_download(p.a.session), "A syncs after the reset at open");
  int32_t state = -1;
  CHECK_OK(ferry_sync_session_state(&state, p.a.session));
  CHECK_EQ_INT(state, FERRY_SESSION_ACTIVE);
  pair_stop(&p);
}

/* ---- kill -9 in the middle of a reset --------------------------------------------------------------- */

/* The child's part (this program run as `test_client_reset --child <dir> <url> <phase>`): the
 * device's App on <dir>, its cached user, its file opened in recover mode. Phase "before" or
 * "after": the reset's callback of that name writes <dir>/in-callback and blocks until the
 * parent kills the process; "open": no callbacks, the parent kills at a random moment. */
static void block_in_callback(const char *dir) {
  char marker[720];
  snprintf(marker, sizeof marker, "%s/in-callback", dir);
  FILE *f = fopen(marker, "w");
  if (f) fclose(f);
  for (;;) pause(); /* the parent's SIGKILL ends this */
}

static const char *child_dir;
static void child_before(void *userdata, ferry_db_t *before) {
  (void)userdata, (void)before;
  block_in_callback(child_dir);
}
static void child_after(void *userdata, ferry_db_t *before, ferry_db_t *after, const ferry_client_reset_report_t *report) {
  (void)userdata, (void)before, (void)after, (void)report;
  block_in_callback(child_dir);
}

static int child_main(const char *dir, const char *url, const char *phase) {
  child_dir = dir;
  make_item_schema();
  ferry_app_options_t o = app_options(dir, url);
  o.reconnect_delay_min_ms = 50;
  o.reconnect_delay_max_ms = 200;
  ferry_app_t *app = app_new_with(&o);
  ferry_user_t *user = NULL;
  CHECK_OK(ferry_app_current_user(&user, app));
  CHECK(user != NULL);
  char path[720];
  snprintf(path, sizeof path, "%s/items.ferry", dir);
  ferry_sync_options_t so = sync_options(path);
  if (strcmp(phase, "before") == 0) so.before_reset = child_before;
  if (strcmp(phase, "after") == 0) so.after_reset = child_after;
  ferry_sync_session_t *session = NULL;
  ferry_db_t *db = NULL;
  CHECK_OK(ferry_sync_open(&session, &db, user, &so));
  for (;;) pause(); /* syncing on the loop thread until the parent's SIGKILL */
  return 0;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int leftovers(const char *dir, const char *needle) {
  int n = 0;
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strstr(e->d_name, needle)) n++;
  closedir(d);
  return n;
}

/* Kills a device with SIGKILL during its reset (in the before callback: fresh state downloaded,
 * nothing applied; in the after callback: applied, callbacks running; or at a random moment
 * from its open on), then opens the file again: it opens and reads as before the reset, the
 * device's unsynced object is still there, and the reset completes: another device of the user
 * gets that object. */
static void test_kill_during_reset(const char *self, unsigned seed) {
  const char *phases[] = {"before", "after", "open", "open", "open", "open"};
  srand(seed);
  for (size_t round = 0; round < sizeof phases / sizeof phases[0]; round++) {
    const char *phase = phases[round];
    unsigned delay_ms = (unsigned)(rand() % 400);
    if (strcmp(phase, "open") == 0)
      printf("kill -9 of a device %u ms after its open, with a client reset to do (seed %u)\n", delay_ms, seed);
    else
      printf("kill -9 of a device in its %s-reset callback\n", phase);
    char email[128];
    random_email(email, sizeof email, "reset-kill");
    ferry_credentials_t c = email_credentials(email, "a-password-for-reset-tests");
    struct device a, b;
    device_start(&a, "killed", c, true);
    device_open_subscribed(&a, sync_options(NULL));
    ferry_value_t synced = new_oid(), unsynced = new_oid();
    CHECK_OK(ferry_db_begin_write(a.db));
    create_item(a.db, synced, a.user_id, "synced", 0);
    CHECK_OK(ferry_db_commit(a.db));
    CHECK_OUTCOME_OK(wait_upload(a.session), "A uploads");
    CHECK_OK(ferry_sync_suspend(a.session));
    CHECK_OK(ferry_db_begin_write(a.db));
    create_item(a.db, unsynced, a.user_id, "unsynced", 1);
    CHECK_OK(ferry_db_commit(a.db));
    char dir[640];
    snprintf(dir, sizeof dir, "%s", a.dir);
    device_stop(&a); /* the user stays cached in dir */

    CHECK_EQ_INT(server_admin_post("sync/terminate"), 200);
    CHECK_EQ_INT(server_admin_post("sync/enable"), 200);

    char *argv[] = {(char *)self, "--child", dir, base_url, (char *)phase, NULL};
    pid_t pid = 0;
    CHECK_EQ_INT(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
    char marker[720];
    snprintf(marker, sizeof marker, "%s/in-callback", dir);
    if (strcmp(phase, "open") == 0) {
      struct timespec t = {(time_t)(delay_ms / 1000), (long)(delay_ms % 1000) * 1000000L};
      nanosleep(&t, NULL); /* the kill's moment is the point of the test, not a wait */
    } else {
      double deadline = now_s() + WAIT_SECONDS;
      while (!file_exists(marker) && now_s() < deadline) {
        int status = 0;
        CHECKF(waitpid(pid, &status, WNOHANG) == 0, "the device process exited (status %d) before its %s callback", status, phase);
        struct timespec tick = {0, 10 * 1000 * 1000};
        nanosleep(&tick, NULL); /* polling the child's marker file with a deadline */
      }
      CHECKF(file_exists(marker), "the device never reached its %s-reset callback", phase);
    }
    CHECK_EQ_INT(kill(pid, SIGKILL), 0);
    int status = 0;
    CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the device process was not killed (status %d)", status);
    if (strcmp(phase, "before") == 0) CHECK(leftovers(dir, ".before-reset-") > 0); /* the snapshot it died with */

    /* reopened: consistent, the unsynced object there, and the reset completes */
    device_dirs(&a, "killed", dir);
    ferry_app_options_t o = app_options(a.dir, base_url);
    o.reconnect_delay_min_ms = 50;
    o.reconnect_delay_max_ms = 200;
    a.app = app_new_with(&o);
    a.errors = calloc(1, sizeof *a.errors);
    CHECK(a.errors != NULL);
    pthread_mutex_init(&a.errors->mu, NULL);
    cond_init_monotonic(&a.errors->cv);
    CHECK_OK(ferry_app_set_sync_error_handler(a.app, on_sync_error, a.errors, on_error_log_free));
    CHECK_OK(ferry_app_current_user(&a.user, a.app));
    CHECK(a.user != NULL);
    CHECK_OK(ferry_user_id(&a.user_id, a.user));
    ferry_sync_options_t so = sync_options(a.db_path);
    CHECK_OK(ferry_sync_open(&a.session, &a.db, a.user, &so));
    CHECK(has_item_in(a.db, unsynced));
    CHECK(has_item_in(a.db, synced));
    CHECK_EQ_INT(count_items(a.db), 2);
    CHECK_EQ_INT(leftovers(dir, ".before-reset-"), 0);

    device_start(&b, "witness", c, false);
    device_open_subscribed(&b, sync_options(NULL));
    double deadline = now_s() + WAIT_SECONDS;
    while (!has_item_in(b.db, unsynced) && now_s() < deadline) CHECK_OUTCOME_OK(wait_download(b.session), "B downloads");
    CHECKF(has_item_in(b.db, unsynced), "round %zu (%s): the killed device's unsynced object never reached the server", round, phase);
    CHECK(has_item_in(b.db, synced));
    CHECK_OUTCOME_OK(wait_upload(a.session), "A's uploads after the reopen");
    CHECK_EQ_INT(count_items(a.db), 2);
    CHECK_EQ_INT(count_items(b.db), 2);
    pthread_mutex_lock(&a.errors->mu);
    CHECKF(a.errors->others == 0, "round %zu (%s): sync errors after the reopen (first: %s)", round, phase, a.errors->other);
    CHECKF(!a.errors->fatal, "round %zu (%s): the reset after the reopen was handed to the host", round, phase);
    pthread_mutex_unlock(&a.errors->mu);
    device_stop(&a);
    device_stop(&b);
  }
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--child") == 0) return child_main(argv[2], argv[3], argv[4]);
  note_main_thread();
  if (!server_start()) {
    printf("test_client_reset: skipped: %s\n", server_skip_reason);
    return 77;
  }
  make_item_schema();
  test_recover();
  test_discard();
  test_manual();
  test_manual_at_next_open();
  const char *seed_env = getenv("FERRY_RESET_KILL_SEED");
  unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : (unsigned)time(NULL);
  /* the program's own path (not /proc/self/exe: under valgrind that is valgrind's tool) */
  static char self[PATH_MAX];
  CHECK(realpath(argv[0], self) != NULL);
  test_kill_during_reset(self, seed);
  ferry_schema_free(item_schema);
  server_stop();
  return check_done("test_client_reset");
}
