/*
 * sync_demo.c — the seeds' Flexible Sync scenario from C, against a running ferry-server.
 *
 *   sync_demo BASE_URL DEVICE_DIR EMAIL first   register + log in, subscribe to complexity <= 4,
 *                                               write two items, wait until the server has them
 *   sync_demo BASE_URL DEVICE_DIR EMAIL second  the cached user (no login), download what other
 *                                               devices wrote, then two illegal writes that the
 *                                               server reverts (compensating writes, error 231)
 *
 * scripts/demo.sh runs it with a Python device in between (demo/sync_demo.py).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry.h"

static void check(int rc, const char *what) {
  if (rc != FERRY_OK) {
    fprintf(stderr, "sync_demo: %s failed: %s (%d): %s\n", what, ferry_strerror(rc), rc, ferry_error_last()->message);
    exit(1);
  }
}

/* ---- waiting for a completion callback (they run on Ferry's loop thread) -------------------- */

struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int code;
  char message[512];
  ferry_user_t *user;
};

static void waiter_init(struct waiter *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &attr);
}

static void finish(struct waiter *w, const ferry_error_t *error) {
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  w->code = error ? error->code : FERRY_OK;
  if (error) snprintf(w->message, sizeof w->message, "%s", error->message);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* The App's log: the client log line of a compensating write is exactly the seeds' one. */
static void on_log(void *userdata, int32_t level, const char *message) {
  (void)userdata, (void)level;
  printf("   client log: %s\n", message);
}

static void on_status(void *userdata, const ferry_error_t *error) { finish(userdata, error); }

static void on_user(void *userdata, ferry_user_t *user, const ferry_error_t *error) {
  ((struct waiter *)userdata)->user = user;
  finish(userdata, error);
}

/* Waits up to 30 s; returns the callback's error code. */
static int wait_done(struct waiter *w, const char *what) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += 30;
  pthread_mutex_lock(&w->mu);
  while (!w->done)
    if (pthread_cond_timedwait(&w->cv, &w->mu, &deadline) == ETIMEDOUT) {
      fprintf(stderr, "sync_demo: %s did not complete within 30 s\n", what);
      exit(1);
    }
  pthread_mutex_unlock(&w->mu);
  return w->code;
}

/* ---- the sync error handler: prints compensating writes as they arrive -------------------- */

struct errors {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int count;
};

static const char *hex(const uint8_t id[12]) {
  static char buf[4][25];
  static int next = 0;
  char *b = buf[next++ % 4];
  for (int i = 0; i < 12; i++) sprintf(b + 2 * i, "%02x", id[i]);
  return b;
}

static void on_sync_error(void *userdata, ferry_sync_session_t *session, const ferry_sync_error_t *e) {
  (void)session;
  struct errors *errs = userdata;
  printf("   sync error handler: code %d, \"%s\", fatal %s, action %d\n", e->code, e->message, e->is_fatal ? "yes" : "no", e->action);
  for (size_t i = 0; i < e->compensating_writes_count; i++) {
    const ferry_compensating_write_t *cw = &e->compensating_writes[i];
    printf("     compensating write: %s %s: %s\n", cw->object_type,
           cw->primary_key.type == FERRY_TYPE_OBJECT_ID ? hex(cw->primary_key.u.object_id) : "?", cw->reason);
  }
  pthread_mutex_lock(&errs->mu);
  errs->count++;
  pthread_cond_broadcast(&errs->cv);
  pthread_mutex_unlock(&errs->mu);
}

static void wait_errors(struct errors *errs, int count) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += 30;
  pthread_mutex_lock(&errs->mu);
  while (errs->count < count)
    if (pthread_cond_timedwait(&errs->cv, &errs->mu, &deadline) == ETIMEDOUT) {
      fprintf(stderr, "sync_demo: no sync error within 30 s\n");
      exit(1);
    }
  pthread_mutex_unlock(&errs->mu);
}

/* ---- items -------------------------------------------------------------------------------- */

struct keys {
  ferry_class_key_t item;
  ferry_property_key_t id, owner, name, complexity;
};

static void print_items(ferry_db_t *db, const struct keys *k, const char *title) {
  ferry_results_t *results = NULL;
  size_t count = 0;
  check(ferry_db_query(&results, db, k->item, "TRUEPREDICATE SORT(itemName ASC)", NULL, 0), "query");
  check(ferry_results_count(&count, results), "count");
  printf("   %s: %zu item%s\n", title, count, count == 1 ? "" : "s");
  for (size_t i = 0; i < count; i++) {
    ferry_object_t *obj = NULL;
    ferry_value_t id, name, complexity;
    check(ferry_results_get(&obj, results, i), "get");
    check(ferry_object_get_value(&id, obj, k->id), "_id");
    check(ferry_object_get_value(&name, obj, k->name), "itemName");
    check(ferry_object_get_value(&complexity, obj, k->complexity), "complexity");
    printf("     %s  %-24.*s complexity %" PRId64 "\n", hex(id.u.object_id), (int)name.u.string.size, name.u.string.data, complexity.u.i);
    ferry_object_free(obj);
  }
  ferry_results_free(results);
}

static ferry_value_t write_item(ferry_db_t *db, const struct keys *k, const char *owner, const char *name, int64_t complexity) {
  ferry_value_t id;
  check(ferry_object_id_generate(&id), "generate id");
  ferry_property_value_t values[] = {
      {k->id, id},
      {k->owner, {.type = FERRY_TYPE_STRING, .u.string = {owner, strlen(owner)}}},
      {k->name, {.type = FERRY_TYPE_STRING, .u.string = {name, strlen(name)}}},
      {k->complexity, {.type = FERRY_TYPE_INT, .u.i = complexity}},
  };
  check(ferry_db_begin_write(db), "begin");
  check(ferry_object_create(db, k->item, values, 4), "create");
  check(ferry_db_commit(db), "commit");
  return id;
}

static void sync_wait(ferry_sync_session_t *s, int upload) {
  struct waiter w;
  waiter_init(&w);
  check(upload ? ferry_sync_wait_for_upload(s, on_status, &w) : ferry_sync_wait_for_download(s, on_status, &w), "wait");
  if (wait_done(&w, upload ? "upload" : "download") != FERRY_OK) {
    fprintf(stderr, "sync_demo: %s failed: %s\n", upload ? "upload" : "download", w.message);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: sync_demo BASE_URL DEVICE_DIR EMAIL first|second\n");
    return 2;
  }
  const char *base_url = argv[1], *dir = argv[2], *email = argv[3];
  int first = strcmp(argv[4], "first") == 0;

  ferry_app_options_t options;
  check(ferry_app_options_init(&options, FERRY_APP_OPTIONS_VERSION), "app options");
  options.app_id = "item-app-seeds";
  options.base_url = base_url;
  options.base_directory = dir;
  options.log_level = FERRY_LOG_ERROR;
  options.log_callback = on_log;
  ferry_app_t *app = NULL;
  check(ferry_app_new(&app, &options), "ferry_app_new");
  struct errors errs = {.count = 0};
  pthread_mutex_init(&errs.mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&errs.cv, &attr);
  check(ferry_app_set_sync_error_handler(app, on_sync_error, &errs, NULL), "error handler");

  ferry_user_t *user = NULL;
  if (first) {
    struct waiter reg;
    waiter_init(&reg);
    check(ferry_app_register_email(app, email, "correct horse battery", on_status, &reg), "register");
    wait_done(&reg, "registration"); /* an already registered email is fine */
    struct waiter login;
    waiter_init(&login);
    ferry_credentials_t creds = {.kind = FERRY_CREDENTIALS_EMAIL_PASSWORD, .email = email, .password = "correct horse battery"};
    check(ferry_app_log_in(app, &creds, on_user, &login), "log in");
    if (wait_done(&login, "login") != FERRY_OK) {
      fprintf(stderr, "sync_demo: login failed: %s\n", login.message);
      return 1;
    }
    user = login.user;
  } else {
    check(ferry_app_current_user(&user, app), "current user");
    if (!user) {
      fprintf(stderr, "sync_demo: no cached user in %s\n", dir);
      return 1;
    }
  }
  const char *user_id = NULL;
  check(ferry_user_id(&user_id, user), "user id");
  printf("   C device: user %s (%s)\n", user_id, first ? "logged in with email/password" : "from the user cache, no login");

  static const ferry_property_info_t item_props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_INDEXED, NULL},
  };
  const ferry_class_info_t classes[] = {{"Item", item_props, 4, FERRY_CLASS_NORMAL}};
  ferry_schema_t *schema = NULL;
  check(ferry_schema_new(&schema, classes, 1), "schema");
  char path[1024];
  snprintf(path, sizeof path, "%s/items.ferry", dir);
  ferry_sync_options_t sync_options;
  check(ferry_sync_options_init(&sync_options, FERRY_SYNC_OPTIONS_VERSION), "sync options");
  sync_options.path = path;
  sync_options.schema = schema;
  ferry_sync_session_t *session = NULL;
  ferry_db_t *db = NULL;
  check(ferry_sync_open(&session, &db, user, &sync_options), "ferry_sync_open");
  ferry_schema_free(schema);
  struct keys k;
  check(ferry_db_find_class(&k.item, db, "Item"), "Item");
  check(ferry_db_find_property(&k.id, db, k.item, "_id"), "_id");
  check(ferry_db_find_property(&k.owner, db, k.item, "ownerId"), "ownerId");
  check(ferry_db_find_property(&k.name, db, k.item, "itemName"), "itemName");
  check(ferry_db_find_property(&k.complexity, db, k.item, "complexity"), "complexity");

  if (first) {
    ferry_subscription_set_t *set = NULL;
    check(ferry_sync_subscriptions(&set, session), "subscriptions");
    check(ferry_subscription_set_add(set, "simple-items", "Item", "complexity <= 4"), "add subscription");
    uint64_t version = 0;
    check(ferry_sync_update_subscriptions(&version, session, set), "update subscriptions");
    ferry_subscription_set_free(set);
    struct waiter w;
    waiter_init(&w);
    check(ferry_sync_wait_for_subscriptions(session, version, on_status, &w), "wait subscriptions");
    wait_done(&w, "subscription");
    printf("   subscribed: simple-items = Item where complexity <= 4 (version %" PRIu64 ", complete)\n", version);
    write_item(db, &k, user_id, "Write code", 3);
    write_item(db, &k, user_id, "Clean the desk", 1);
    printf("   wrote 2 items locally\n");
    sync_wait(session, 1);
    printf("   the server acknowledged the upload (durable on the server)\n");
    print_items(db, &k, "C device now holds");
  } else {
    sync_wait(session, 1);
    sync_wait(session, 0);
    print_items(db, &k, "C device after downloading");
    printf("\n   C device writes an item with complexity 7 (outside the subscription complexity <= 4)\n");
    ferry_value_t complex = write_item(db, &k, user_id, "Do the dishes", 7);
    wait_errors(&errs, 1);
    ferry_object_t *obj = NULL;
    printf("   the item %s locally after the revert\n", ferry_object_get(&obj, db, k.item, &complex) == FERRY_ERR_NOT_FOUND ? "is gone" : "is STILL present");
    ferry_object_free(obj);
    printf("\n   C device writes an item whose ownerId is not the user's id (the role's write filter)\n");
    ferry_value_t foreign = write_item(db, &k, "This string does not match the user.id", "Write code that generates a permission error", 1);
    wait_errors(&errs, 2);
    printf("   the item %s locally after the revert\n", ferry_object_get(&obj, db, k.item, &foreign) == FERRY_ERR_NOT_FOUND ? "is gone" : "is STILL present");
    ferry_object_free(obj);
    print_items(db, &k, "C device finally holds");
  }
  ferry_sync_session_free(session);
  ferry_db_free(db);
  ferry_user_free(user);
  ferry_app_free(app);
  return 0;
}
