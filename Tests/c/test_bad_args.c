/*
 * test_bad_args.c — every function declared in ferry.h called with bad arguments: NULL
 * out-pointers, NULL handles, freed handles, handles of the wrong kind, a closed database,
 * bad values, unknown class and property keys, bad queries, bad options and schemas. Each
 * call must return the documented code with a non-empty ferry_error_last() message, leave
 * its out-parameters untouched, and never crash. Under valgrind, an invalid read here means
 * the library dereferenced a handle before validating it.
 *
 * Where the header leaves the code open, CHECK_ERR_ANY lists the acceptable codes and a
 * comment says why.
 */
#include "check.h"
#include "sync_server.h"

#include <limits.h>
#include <pthread.h>

/* Every function of ferry.h, referenced so that a missing export fails the link. (The
 * symbol test compares the exports with the header; it also checks that every function
 * declared there is named in this file.) */
static void *const all_functions[] = {
    (void *)ferry_version,          (void *)ferry_version_number,
    (void *)ferry_error_last,       (void *)ferry_strerror,
    (void *)ferry_object_id_generate, (void *)ferry_schema_new,
    (void *)ferry_schema_free,      (void *)ferry_db_options_init,
    (void *)ferry_db_open,          (void *)ferry_db_close,
    (void *)ferry_db_free,          (void *)ferry_db_is_closed,
    (void *)ferry_db_class_count,   (void *)ferry_db_find_class,
    (void *)ferry_db_get_class,     (void *)ferry_db_find_property,
    (void *)ferry_db_get_property,  (void *)ferry_db_begin_write,
    (void *)ferry_db_commit,        (void *)ferry_db_cancel,
    (void *)ferry_db_is_in_transaction, (void *)ferry_object_create,
    (void *)ferry_object_upsert,    (void *)ferry_object_set,
    (void *)ferry_object_add_int,   (void *)ferry_object_delete,
    (void *)ferry_list_insert,      (void *)ferry_list_set,
    (void *)ferry_list_erase,       (void *)ferry_list_clear,
    (void *)ferry_object_get,       (void *)ferry_object_get_class,
    (void *)ferry_object_get_value, (void *)ferry_object_get_list,
    (void *)ferry_object_free,      (void *)ferry_db_query,
    (void *)ferry_results_count,    (void *)ferry_results_get,
    (void *)ferry_results_free,     (void *)ferry_db_observe_query,
    (void *)ferry_db_observe_object, (void *)ferry_notification_token_free,
    (void *)ferry_db_notification_fd, (void *)ferry_db_deliver_notifications,
    (void *)ferry_db_history_count, (void *)ferry_db_verify_history,
    /* sync */
    (void *)ferry_app_options_init, (void *)ferry_app_new,
    (void *)ferry_app_free,         (void *)ferry_app_log_in,
    (void *)ferry_app_register_email, (void *)ferry_app_log_out,
    (void *)ferry_app_current_user, (void *)ferry_app_user_count,
    (void *)ferry_app_get_user,     (void *)ferry_user_id,
    (void *)ferry_user_state,       (void *)ferry_user_free,
    (void *)ferry_app_set_sync_error_handler, (void *)ferry_sync_options_init,
    (void *)ferry_sync_open,        (void *)ferry_sync_wait_for_upload,
    (void *)ferry_sync_wait_for_download, (void *)ferry_sync_session_free,
    (void *)ferry_sync_subscriptions, (void *)ferry_subscription_set_free,
    (void *)ferry_subscription_set_version, (void *)ferry_subscription_set_state,
    (void *)ferry_subscription_set_error, (void *)ferry_subscription_set_count,
    (void *)ferry_subscription_set_get, (void *)ferry_subscription_set_add,
    (void *)ferry_subscription_set_remove, (void *)ferry_subscription_set_remove_type,
    (void *)ferry_subscription_set_remove_all, (void *)ferry_sync_update_subscriptions,
    (void *)ferry_sync_wait_for_subscriptions,
    /* session control (FERRY_APP_OPTIONS_VERSION / FERRY_SYNC_OPTIONS_VERSION 2) */
    (void *)ferry_app_reconnect,    (void *)ferry_sync_open_async,
    (void *)ferry_sync_connection_state, (void *)ferry_sync_session_state,
    (void *)ferry_sync_observe_connection_state, (void *)ferry_connection_state_token_free,
    (void *)ferry_sync_suspend,     (void *)ferry_sync_resume,
    (void *)ferry_sync_observe_progress, (void *)ferry_progress_token_free,
    (void *)ferry_sync_write_copy,
    /* client reset (FERRY_SYNC_OPTIONS_VERSION 3) */
    (void *)ferry_db_write_copy,    (void *)ferry_app_handle_client_reset,
    /* what a compensating write took (F-NOLOSS) */
    (void *)ferry_sync_error_reverted_object, (void *)ferry_reverted_object_copy,
    (void *)ferry_reverted_object_free, (void *)ferry_db_reapply_reverted,
    /* encryption at rest (FERRY_DB_OPTIONS_VERSION 2) */
    (void *)ferry_db_change_key,
    /* write receipts */
    (void *)ferry_db_commit_with_receipt, (void *)ferry_db_receipt_state,
    (void *)ferry_db_read_receipt,  (void *)ferry_sync_wait_for_receipt,
    /* querying the server online (issue 24) */
    (void *)ferry_remote_find,      (void *)ferry_remote_count,
    (void *)ferry_remote_results_count, (void *)ferry_remote_results_json,
    (void *)ferry_remote_results_field_count, (void *)ferry_remote_results_field,
    (void *)ferry_remote_results_get_value, (void *)ferry_remote_results_get_list,
    (void *)ferry_remote_results_free,
};

/* ---- userdata accounting ------------------------------------------------------------------ */

static int frees = 0;
static int calls = 0;
static void count_free(void *userdata) {
  (void)userdata;
  __atomic_add_fetch(&frees, 1, __ATOMIC_SEQ_CST);
}
static void count_call(void *userdata, const ferry_change_set_t *c) {
  (void)userdata;
  (void)c;
  __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
}
static int frees_now(void) { return __atomic_load_n(&frees, __ATOMIC_SEQ_CST); }

/* ---- the schema --------------------------------------------------------------------------- */

static const ferry_property_info_t item_props[] = {
    {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
    {"name", FERRY_TYPE_STRING, 0, NULL},
    {"n", FERRY_TYPE_INT, FERRY_PROPERTY_OPTIONAL, NULL},
    {"tags", FERRY_TYPE_INT, FERRY_PROPERTY_LIST, NULL},
    {"when", FERRY_TYPE_TIMESTAMP, 0, NULL},
    {"blob", FERRY_TYPE_BINARY, 0, NULL},
};

static ferry_schema_t *make_schema(void) {
  ferry_class_info_t cls = {"Item", item_props, sizeof item_props / sizeof item_props[0], 0};
  ferry_schema_t *s = NULL;
  CHECK_OK(ferry_schema_new(&s, &cls, 1));
  return s;
}

/* ---- global functions --------------------------------------------------------------------- */

static void *fresh_thread_error(void *arg) {
  (void)arg;
  const ferry_error_t *e = ferry_error_last();
  static int result; /* 0 ok, 1 NULL, 2 code not OK, 3 message NULL */
  result = e == NULL ? 1 : e->code != FERRY_OK ? 2 : e->message == NULL ? 3 : 0;
  if (result == 0) {
    /* fail here: the main thread's error must not change */
    ferry_value_t *null_out = NULL;
    if (ferry_object_id_generate(null_out) != FERRY_ERR_INVALID_ARGUMENT) result = 4;
    else if (ferry_error_last()->code != FERRY_ERR_INVALID_ARGUMENT) result = 5;
  }
  return &result;
}

static void test_globals(void) {
  CHECK(ferry_version() != NULL && ferry_version()[0] != '\0');
  CHECK(ferry_version_number() ==
        FERRY_VERSION_MAJOR * 10000 + FERRY_VERSION_MINOR * 100 + FERRY_VERSION_PATCH);

  /* a thread that never failed sees FERRY_OK with a non-NULL message */
  pthread_t t;
  void *ret = NULL;
  CHECK_ERR(ferry_db_options_init(NULL, FERRY_DB_OPTIONS_VERSION), FERRY_ERR_INVALID_ARGUMENT); /* fail on main first */
  CHECK(pthread_create(&t, NULL, fresh_thread_error, NULL) == 0);
  CHECK(pthread_join(t, &ret) == 0);
  CHECKF(*(int *)ret == 0, "error state of a fresh thread: check %d failed", *(int *)ret);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_ARGUMENT); /* per thread: unchanged on main */
  /* successful calls do not clear it */
  ferry_value_t oid;
  CHECK_OK(ferry_object_id_generate(&oid));
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_object_id_generate(NULL), FERRY_ERR_INVALID_ARGUMENT);

  /* strerror: every code has a description, unknown ones "unknown error" */
  for (int code = FERRY_ERR_DECRYPT; code <= 0; code++) {
    const char *s1 = ferry_strerror(code);
    CHECKF(s1 != NULL && s1[0] != '\0' && strcmp(s1, "unknown error") != 0,
           "ferry_strerror(%d) = \"%s\"", code, s1 ? s1 : "(NULL)");
  }
  const char *s100 = ferry_strerror(FERRY_ERR_INTERNAL);
  CHECK(s100 != NULL && strcmp(s100, "unknown error") != 0);
  const int unknown[] = {1, 2, 100, -26, -27, -99, -101, -1000, INT_MIN, INT_MAX, INT_MIN + 1};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    CHECKF(ferry_strerror(unknown[i]) != NULL && strcmp(ferry_strerror(unknown[i]), "unknown error") == 0,
           "ferry_strerror(%d) = \"%s\"", unknown[i], ferry_strerror(unknown[i]));

  /* every free function accepts NULL */
  ferry_schema_free(NULL);
  ferry_db_free(NULL);
  ferry_object_free(NULL);
  ferry_results_free(NULL);
  ferry_notification_token_free(NULL);
  ferry_app_free(NULL);
  ferry_user_free(NULL);
  ferry_sync_session_free(NULL);
  ferry_subscription_set_free(NULL);
  ferry_connection_state_token_free(NULL);
  ferry_progress_token_free(NULL);
}

/* ---- schemas ---------------------------------------------------------------------------- */

static void schema_fails(const ferry_class_info_t *classes, size_t n, int code, const char *names1,
                         const char *names2, int line) {
  ferry_schema_t *s = (ferry_schema_t *)&s;
  int rc = ferry_schema_new(&s, classes, n);
  CHECKF(rc == code, "line %d: ferry_schema_new returned %d (%s), expected %d (%s)", line, rc,
         ferry_strerror(rc), code, ferry_strerror(code));
  CHECK_LAST_ERROR(code);
  CHECKF(s == (ferry_schema_t *)&s, "line %d: *out changed on failure", line);
  const char *msg = ferry_error_last()->message;
  if (names1) CHECKF(strstr(msg, names1) != NULL, "line %d: message should name \"%s\": %s", line, names1, msg);
  if (names2) CHECKF(strstr(msg, names2) != NULL, "line %d: message should name \"%s\": %s", line, names2, msg);
}
#define SCHEMA_FAILS(classes, n, code, a, b) schema_fails(classes, n, code, a, b, __LINE__)

static void test_schemas(void) {
  ferry_class_info_t item = {"Item", item_props, sizeof item_props / sizeof item_props[0], 0};
  ferry_schema_t *s = NULL;
  CHECK_ERR(ferry_schema_new(NULL, &item, 1), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_schema_new(&s, NULL, 1), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(s == NULL);
  ferry_class_info_t c = item;
  c.name = NULL;
  CHECK_ERR(ferry_schema_new(&s, &c, 1), FERRY_ERR_INVALID_ARGUMENT);
  c = item;
  c.properties = NULL;
  CHECK_ERR(ferry_schema_new(&s, &c, 1), FERRY_ERR_INVALID_ARGUMENT);
  ferry_property_info_t p_null_name[] = {{"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
                                         {NULL, FERRY_TYPE_INT, 0, NULL}};
  c = (ferry_class_info_t){"Item", p_null_name, 2, 0};
  CHECK_ERR(ferry_schema_new(&s, &c, 1), FERRY_ERR_INVALID_ARGUMENT);

#define PK {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL}
  /* duplicate class names */
  ferry_property_info_t ok_props[] = {PK, {"name", FERRY_TYPE_STRING, 0, NULL}};
  ferry_class_info_t two[] = {{"Item", ok_props, 2, 0}, {"Item", ok_props, 2, 0}};
  SCHEMA_FAILS(two, 2, FERRY_ERR_INVALID_SCHEMA, "Item", NULL);
  /* duplicate property names */
  ferry_property_info_t dup[] = {PK, {"name", FERRY_TYPE_STRING, 0, NULL}, {"name", FERRY_TYPE_INT, 0, NULL}};
  c = (ferry_class_info_t){"Dup", dup, 3, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "Dup", "name");
  /* names: empty, 64 bytes, starting with "__" (63 bytes is fine) */
  char n63[64], n64[65];
  memset(n63, 'a', 63);
  n63[63] = '\0';
  memset(n64, 'b', 64);
  n64[64] = '\0';
  c = (ferry_class_info_t){"", ok_props, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, NULL, NULL);
  c = (ferry_class_info_t){n64, ok_props, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, NULL, NULL);
  c = (ferry_class_info_t){"__Hidden", ok_props, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "__Hidden", NULL);
  ferry_property_info_t long_prop[] = {PK, {n64, FERRY_TYPE_INT, 0, NULL}};
  c = (ferry_class_info_t){"LongProp", long_prop, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "LongProp", NULL);
  ferry_property_info_t empty_prop[] = {PK, {"", FERRY_TYPE_INT, 0, NULL}};
  c = (ferry_class_info_t){"EmptyProp", empty_prop, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "EmptyProp", NULL);
  ferry_property_info_t under_prop[] = {PK, {"__x", FERRY_TYPE_INT, 0, NULL}};
  c = (ferry_class_info_t){"UnderProp", under_prop, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "UnderProp", "__x");
  ferry_property_info_t ok63[] = {PK, {n63, FERRY_TYPE_INT, 0, NULL}};
  ferry_class_info_t c63 = {n63, ok63, 2, 0};
  CHECK_OK(ferry_schema_new(&s, &c63, 1));
  ferry_schema_free(s);
  s = NULL;
  /* primary keys */
  ferry_property_info_t no_pk[] = {{"name", FERRY_TYPE_STRING, 0, NULL}};
  c = (ferry_class_info_t){"NoPk", no_pk, 1, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "NoPk", NULL);
  ferry_property_info_t id_not_pk[] = {{"_id", FERRY_TYPE_INT, 0, NULL}};
  c = (ferry_class_info_t){"IdNotPk", id_not_pk, 1, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "IdNotPk", NULL);
  ferry_property_info_t two_pk[] = {PK, {"other", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL}};
  c = (ferry_class_info_t){"TwoPk", two_pk, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "TwoPk", NULL);
  ferry_property_info_t pk_named[] = {{"id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL}};
  c = (ferry_class_info_t){"PkNamed", pk_named, 1, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "PkNamed", "id");
  ferry_property_info_t pk_opt[] = {{"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY | FERRY_PROPERTY_OPTIONAL, NULL}};
  c = (ferry_class_info_t){"PkOpt", pk_opt, 1, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "PkOpt", "_id");
  ferry_property_info_t pk_list[] = {{"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY | FERRY_PROPERTY_LIST, NULL}};
  c = (ferry_class_info_t){"PkList", pk_list, 1, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "PkList", "_id");
  const int32_t bad_pk_types[] = {FERRY_TYPE_BOOL, FERRY_TYPE_DOUBLE, FERRY_TYPE_BINARY,
                                  FERRY_TYPE_TIMESTAMP, FERRY_TYPE_LINK};
  for (size_t i = 0; i < sizeof bad_pk_types / sizeof bad_pk_types[0]; i++) {
    ferry_property_info_t p[] = {{"_id", bad_pk_types[i], FERRY_PROPERTY_PRIMARY_KEY,
                                  bad_pk_types[i] == FERRY_TYPE_LINK ? "PkType" : NULL}};
    c = (ferry_class_info_t){"PkType", p, 1, 0};
    SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "PkType", "_id");
  }
  const int32_t good_pk_types[] = {FERRY_TYPE_OBJECT_ID, FERRY_TYPE_STRING, FERRY_TYPE_INT, FERRY_TYPE_UUID};
  for (size_t i = 0; i < 4; i++) {
    ferry_property_info_t p[] = {{"_id", good_pk_types[i], FERRY_PROPERTY_PRIMARY_KEY, NULL}};
    c = (ferry_class_info_t){"PkOk", p, 1, 0};
    CHECK_OK(ferry_schema_new(&s, &c, 1));
    ferry_schema_free(s);
    s = NULL;
  }
  /* links */
  ferry_property_info_t link_missing[] = {PK, {"to", FERRY_TYPE_LINK, FERRY_PROPERTY_OPTIONAL, "Nowhere"}};
  c = (ferry_class_info_t){"Linker", link_missing, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "Linker", "to");
  ferry_property_info_t link_null[] = {PK, {"to", FERRY_TYPE_LINK, FERRY_PROPERTY_OPTIONAL, NULL}};
  c = (ferry_class_info_t){"Linker", link_null, 2, 0};
  /* a link without a target: a schema error, or a NULL pointer (INVALID_ARGUMENT) */
  CHECK_ERR_ANY(ferry_schema_new(&s, &c, 1), FERRY_ERR_INVALID_SCHEMA, FERRY_ERR_INVALID_ARGUMENT);
  /* optional lists, bad types */
  ferry_property_info_t opt_list[] = {PK, {"l", FERRY_TYPE_INT, FERRY_PROPERTY_LIST | FERRY_PROPERTY_OPTIONAL, NULL}};
  c = (ferry_class_info_t){"OptList", opt_list, 2, 0};
  SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "OptList", "l");
  const int32_t bad_types[] = {FERRY_TYPE_NULL, 10, 99, -1, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
    ferry_property_info_t p[] = {PK, {"weird", bad_types[i], 0, NULL}};
    c = (ferry_class_info_t){"BadType", p, 2, 0};
    SCHEMA_FAILS(&c, 1, FERRY_ERR_INVALID_SCHEMA, "BadType", "weird");
  }
  CHECK(s == NULL);
#undef PK
}

/* ---- options and opening ------------------------------------------------------------------ */

static void test_options(const ferry_schema_t *schema, ferry_schema_t *freed_schema) {
  ferry_db_options_t o, sentinel;
  memset(&sentinel, 0xa5, sizeof sentinel);
  CHECK_ERR(ferry_db_options_init(NULL, FERRY_DB_OPTIONS_VERSION), FERRY_ERR_INVALID_ARGUMENT);
  const uint32_t bad_versions[] = {0, FERRY_DB_OPTIONS_VERSION + 1, 1000, UINT32_MAX};
  for (size_t i = 0; i < 4; i++) {
    o = sentinel;
    CHECK_ERR(ferry_db_options_init(&o, bad_versions[i]), FERRY_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&o, &sentinel, sizeof o) == 0);
  }
  CHECK_OK(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION));
  CHECK_EQ_INT(o.version, FERRY_DB_OPTIONS_VERSION);
  CHECK(o.path == NULL && o.in_memory_identifier == NULL && o.schema == NULL);
  CHECK_EQ_INT(o.delivery, FERRY_DELIVERY_LOOP);
  CHECK(!o.synced);
  CHECK(o.encryption_key == NULL);

  ferry_db_t *db = (ferry_db_t *)&db;
  ferry_db_t *const untouched = db;
  ferry_db_options_t good = o;
  good.path = test_path("options.ferry");
  good.schema = schema;
  CHECK_ERR(ferry_db_open(NULL, &good), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_db_open(&db, NULL), FERRY_ERR_INVALID_ARGUMENT);
  for (size_t i = 0; i < 4; i++) {
    o = good;
    o.version = bad_versions[i];
    CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
  }
  o = good;
  o.in_memory_identifier = "both";
  CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
  o = good;
  o.path = NULL;
  CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
  const int32_t bad_delivery[] = {-1, 2, 99};
  for (size_t i = 0; i < 3; i++) {
    o = good;
    o.delivery = bad_delivery[i];
    CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
  }
  o = good;
  o.path = NULL;
  o.in_memory_identifier = "synced-in-memory";
  o.synced = true;
  /* ferry.h: synced is "Not allowed for in-memory databases" here (ferry_sync_open with
     in_memory is the way to sync one). */
  CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(db == untouched);
  o = good;
  o.path = "";
  /* an empty path: a bad option, or a file that cannot be opened */
  CHECK_ERR_ANY(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_IO);
  /* the schema is a handle: freed or of another kind */
  o = good;
  o.schema = freed_schema;
  CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_HANDLE);
  CHECK(db == untouched);
  /* an encryption key for an in-memory database */
  static const uint8_t key[FERRY_ENCRYPTION_KEY_SIZE] = {1};
  o = good;
  o.path = NULL;
  o.in_memory_identifier = "encrypted-in-memory";
  o.encryption_key = key;
  CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(db == untouched);
  /* none of this created the file */
  struct stat st;
  CHECK(stat(good.path, &st) != 0);
  /* ferry_db_change_key: no path, an empty path, a missing file, a directory; none is made */
  CHECK_ERR(ferry_db_change_key(NULL, NULL, key), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_db_change_key("", NULL, key), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_db_change_key(good.path, NULL, key), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_db_change_key(good.path, key, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR_ANY(ferry_db_change_key(test_tmpdir(), NULL, key), FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_IO);
  CHECK(stat(good.path, &st) != 0);
}

/* ---- handle-taking functions ---------------------------------------------------------------- */

enum db_fn {
  F_IS_CLOSED, F_CLASS_COUNT, F_FIND_CLASS, F_GET_CLASS, F_FIND_PROPERTY, F_GET_PROPERTY,
  F_BEGIN_WRITE, F_COMMIT, F_CANCEL, F_IS_IN_TRANSACTION, F_CREATE, F_UPSERT, F_SET, F_ADD_INT,
  F_DELETE, F_LIST_INSERT, F_LIST_SET, F_LIST_ERASE, F_LIST_CLEAR, F_OBJECT_GET, F_QUERY,
  F_OBSERVE_QUERY, F_OBSERVE_OBJECT, F_NOTIFICATION_FD, F_DELIVER, F_HISTORY_COUNT,
  F_VERIFY_HISTORY, F_WRITE_COPY, F_CLOSE, F_COUNT
};
static const char *const db_fn_names[F_COUNT] = {
    "ferry_db_is_closed", "ferry_db_class_count", "ferry_db_find_class", "ferry_db_get_class",
    "ferry_db_find_property", "ferry_db_get_property", "ferry_db_begin_write", "ferry_db_commit",
    "ferry_db_cancel", "ferry_db_is_in_transaction", "ferry_object_create", "ferry_object_upsert",
    "ferry_object_set", "ferry_object_add_int", "ferry_object_delete", "ferry_list_insert",
    "ferry_list_set", "ferry_list_erase", "ferry_list_clear", "ferry_object_get", "ferry_db_query",
    "ferry_db_observe_query", "ferry_db_observe_object", "ferry_db_notification_fd",
    "ferry_db_deliver_notifications", "ferry_db_history_count", "ferry_db_verify_history",
    "ferry_db_write_copy", "ferry_db_close"};
/* which have an out-parameter that may not be NULL */
static bool has_out(enum db_fn f) {
  switch (f) {
    case F_IS_CLOSED: case F_CLASS_COUNT: case F_FIND_CLASS: case F_GET_CLASS:
    case F_FIND_PROPERTY: case F_GET_PROPERTY: case F_IS_IN_TRANSACTION: case F_OBJECT_GET:
    case F_QUERY: case F_OBSERVE_QUERY: case F_OBSERVE_OBJECT: case F_NOTIFICATION_FD:
    case F_HISTORY_COUNT:
      return true;
    default:
      return false;
  }
}

/* Calls f on db with otherwise valid arguments (class 0, property 1 "name", key 1), through an
 * out-buffer filled with 0xa5 (or a NULL out-pointer). Checks that a failing call left the
 * buffer alone and that a failing registration ran userdata_free once. */
static unsigned char outbuf[512];
static int call_db(enum db_fn f, ferry_db_t *db, bool null_out) {
  memset(outbuf, 0xa5, sizeof outbuf);
  void *out = null_out ? NULL : outbuf;
  ferry_value_t key = v_int(1), name = v_str("x"), tag = v_int(5);
  ferry_property_value_t vals[] = {pv(0, key), pv(1, name)};
  int before = frees_now();
  int rc;
  switch (f) {
    case F_IS_CLOSED: rc = ferry_db_is_closed(out, db); break;
    case F_CLASS_COUNT: rc = ferry_db_class_count(out, db); break;
    case F_FIND_CLASS: rc = ferry_db_find_class(out, db, "Item"); break;
    case F_GET_CLASS: rc = ferry_db_get_class(out, db, 0); break;
    case F_FIND_PROPERTY: rc = ferry_db_find_property(out, db, 0, "name"); break;
    case F_GET_PROPERTY: rc = ferry_db_get_property(out, db, 0, 1); break;
    case F_BEGIN_WRITE: rc = ferry_db_begin_write(db); break;
    case F_COMMIT: rc = ferry_db_commit(db); break;
    case F_CANCEL: rc = ferry_db_cancel(db); break;
    case F_IS_IN_TRANSACTION: rc = ferry_db_is_in_transaction(out, db); break;
    case F_CREATE: rc = ferry_object_create(db, 0, vals, 2); break;
    case F_UPSERT: rc = ferry_object_upsert(db, 0, vals, 2); break;
    case F_SET: rc = ferry_object_set(db, 0, &key, 1, &name); break;
    case F_ADD_INT: rc = ferry_object_add_int(db, 0, &key, 2, 1); break;
    case F_DELETE: rc = ferry_object_delete(db, 0, &key); break;
    case F_LIST_INSERT: rc = ferry_list_insert(db, 0, &key, 3, 0, &tag); break;
    case F_LIST_SET: rc = ferry_list_set(db, 0, &key, 3, 0, &tag); break;
    case F_LIST_ERASE: rc = ferry_list_erase(db, 0, &key, 3, 0); break;
    case F_LIST_CLEAR: rc = ferry_list_clear(db, 0, &key, 3); break;
    case F_OBJECT_GET: rc = ferry_object_get(out, db, 0, &key); break;
    case F_QUERY: rc = ferry_db_query(out, db, 0, "TRUEPREDICATE", NULL, 0); break;
    case F_OBSERVE_QUERY:
      rc = ferry_db_observe_query(out, db, 0, "TRUEPREDICATE", NULL, 0, count_call, NULL, count_free);
      break;
    case F_OBSERVE_OBJECT:
      rc = ferry_db_observe_object(out, db, 0, &key, count_call, NULL, count_free);
      break;
    case F_NOTIFICATION_FD: rc = ferry_db_notification_fd(out, db); break;
    case F_DELIVER: rc = ferry_db_deliver_notifications(out, db); break;
    case F_HISTORY_COUNT: rc = ferry_db_history_count(out, db); break;
    case F_VERIFY_HISTORY: rc = ferry_db_verify_history(db); break;
    case F_WRITE_COPY: rc = ferry_db_write_copy(db, test_path("never-copied.ferry")); break;
    case F_CLOSE: rc = ferry_db_close(db); break;
    default: rc = -12345;
  }
  if (rc != FERRY_OK) {
    struct stat st;
    if (f == F_WRITE_COPY) CHECKF(stat(test_path("never-copied.ferry"), &st) != 0, "a failed ferry_db_write_copy (%d) left a file", rc);
    for (size_t i = 0; i < sizeof outbuf; i++)
      CHECKF(outbuf[i] == 0xa5, "%s failed with %d but wrote to its out-parameter", db_fn_names[f], rc);
    if (f == F_OBSERVE_QUERY || f == F_OBSERVE_OBJECT)
      CHECKF(frees_now() == before + 1, "%s failed: userdata_free ran %d times, expected once",
             db_fn_names[f], frees_now() - before);
  }
  return rc;
}

/* Every db function on a bad handle fails with `code`, except those in `except` (OK). */
/* The write-receipt functions on a bad or closed database handle: the error, outs untouched,
 * and no callback. */
static void stray_receipt(void *userdata, const ferry_receipt_t *receipt, const ferry_error_t *e) {
  (void)userdata; (void)receipt; (void)e;
  CHECKF(false, "a receipt callback ran for a call that failed");
}

static void receipt_fns_fail(ferry_db_t *db, int code, const char *what) {
  uint64_t receipt = 777;
  int32_t state = 777;
  int rc = ferry_db_commit_with_receipt(&receipt, db);
  CHECKF(rc == code, "ferry_db_commit_with_receipt on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  rc = ferry_db_receipt_state(&state, db, 1);
  CHECKF(rc == code, "ferry_db_receipt_state on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  rc = ferry_db_read_receipt(db, 1, stray_receipt, NULL);
  CHECKF(rc == code, "ferry_db_read_receipt on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  CHECK(receipt == 777 && state == 777);
}

static void all_db_fns_fail(ferry_db_t *db, int code, const char *what) {
  for (int f = 0; f < F_COUNT; f++) {
    int rc = call_db((enum db_fn)f, db, false);
    int want = code;
    if (code == FERRY_ERR_CLOSED && (f == F_IS_CLOSED || f == F_CLOSE)) want = FERRY_OK;
    if (code == FERRY_ERR_CLOSED && f == F_NOTIFICATION_FD && rc == FERRY_OK) {
      /* the header says the fd stays valid until the handle is freed, and also that every
         call on a closed handle but ferry_db_free fails with CLOSED: both are accepted */
      continue;
    }
    CHECKF(rc == want, "%s on %s returned %d (%s), expected %d (%s)", db_fn_names[f], what, rc,
           ferry_strerror(rc), want, ferry_strerror(want));
    if (want != FERRY_OK) CHECK_LAST_ERROR(want);
    if (code == FERRY_ERR_CLOSED && f == F_IS_CLOSED) CHECK(*(bool *)outbuf == true);
  }
  receipt_fns_fail(db, code, what);
}

/* The functions on other handle kinds. */
static void results_fns_fail(const ferry_results_t *r, int code, const char *what) {
  size_t n = 777;
  ferry_object_t *o = (ferry_object_t *)&n;
  int rc = ferry_results_count(&n, r);
  CHECKF(rc == code, "ferry_results_count on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  CHECK_EQ_INT(n, 777);
  rc = ferry_results_get(&o, r, 0);
  CHECKF(rc == code, "ferry_results_get on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  CHECK(o == (ferry_object_t *)&n);
}

static void object_fns_fail(const ferry_object_t *o, int code, const char *what) {
  ferry_class_key_t c = 777;
  ferry_value_t v = v_int(777);
  const ferry_value_t *items = &v;
  size_t n = 777;
  int rc = ferry_object_get_class(&c, o);
  CHECKF(rc == code, "ferry_object_get_class on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  rc = ferry_object_get_value(&v, o, 1);
  CHECKF(rc == code, "ferry_object_get_value on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  rc = ferry_object_get_list(&items, &n, o, 3);
  CHECKF(rc == code, "ferry_object_get_list on %s returned %d, expected %d", what, rc, code);
  CHECK_LAST_ERROR(code);
  CHECK(c == 777 && v.type == FERRY_TYPE_INT && v.u.i == 777 && items == &v && n == 777);
}

/* ---- sync: apps, users, sessions, subscription sets ---------------------------------------- */

/* Callbacks given only to calls that must fail: a failing call never calls back, so these
 * must never run (checked after a barrier: a later completion on the same loop). */
static int stray_calls = 0;
static void stray_status(void *userdata, const ferry_error_t *e) {
  (void)userdata;
  (void)e;
  __atomic_add_fetch(&stray_calls, 1, __ATOMIC_SEQ_CST);
}
static void stray_user(void *userdata, ferry_user_t *user, const ferry_error_t *e) {
  (void)userdata;
  (void)e;
  ferry_user_free(user);
  __atomic_add_fetch(&stray_calls, 1, __ATOMIC_SEQ_CST);
}
static void stray_sync_error(void *userdata, ferry_sync_session_t *s, const ferry_sync_error_t *e) {
  (void)userdata;
  (void)s;
  (void)e;
}
static void stray_open(void *userdata, ferry_sync_session_t *s, ferry_db_t *db, const ferry_error_t *e) {
  (void)userdata;
  (void)s; /* (leaked if this ever runs: a session cannot be freed on the loop thread) */
  (void)db;
  (void)e;
  __atomic_add_fetch(&stray_calls, 1, __ATOMIC_SEQ_CST);
}
static void stray_state(void *userdata, int32_t old_state, int32_t new_state) {
  (void)userdata;
  (void)old_state;
  (void)new_state;
  __atomic_add_fetch(&stray_calls, 1, __ATOMIC_SEQ_CST);
}
static void stray_progress(void *userdata, const ferry_progress_t *p) {
  (void)userdata;
  (void)p;
  __atomic_add_fetch(&stray_calls, 1, __ATOMIC_SEQ_CST);
}

/* Callbacks of the registrations that succeed: they may run (state changes, progress reports
 * of a live session), so they only count. */
static int live_calls = 0;
static void live_state(void *userdata, int32_t old_state, int32_t new_state) {
  (void)userdata;
  (void)old_state;
  (void)new_state;
  __atomic_add_fetch(&live_calls, 1, __ATOMIC_SEQ_CST);
}
static void live_progress(void *userdata, const ferry_progress_t *p) {
  (void)userdata;
  (void)p;
  __atomic_add_fetch(&live_calls, 1, __ATOMIC_SEQ_CST);
}

/* userdata_free of a token freed by ferry_connection_state_token_free or
 * ferry_progress_token_free: it runs on the loop thread after the free returns, so it is
 * counted under a mutex and waited for with a deadline. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;
} loop_frees = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
static void count_loop_free(void *userdata) {
  (void)userdata;
  pthread_mutex_lock(&loop_frees.mu);
  loop_frees.n++;
  pthread_cond_broadcast(&loop_frees.cv);
  pthread_mutex_unlock(&loop_frees.mu);
}
static int loop_frees_now(void) {
  pthread_mutex_lock(&loop_frees.mu);
  int n = loop_frees.n;
  pthread_mutex_unlock(&loop_frees.mu);
  return n;
}
/* Waits until at least `want` token userdata were freed (60 s); how many were. */
static int loop_frees_wait(int want) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 60;
  pthread_mutex_lock(&loop_frees.mu);
  while (loop_frees.n < want)
    if (pthread_cond_timedwait(&loop_frees.cv, &loop_frees.mu, &deadline) == ETIMEDOUT) break;
  int n = loop_frees.n;
  pthread_mutex_unlock(&loop_frees.mu);
  return n;
}

/* One completion waited for with a deadline (the real calls of this section). */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int code;
  ferry_user_t *user;
  ferry_sync_session_t *session; /* ferry_sync_open_async's completion */
  ferry_db_t *db;
} done = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, NULL, NULL};
static void done_status(void *userdata, const ferry_error_t *e) {
  (void)userdata;
  pthread_mutex_lock(&done.mu);
  done.code = e ? e->code : FERRY_OK;
  done.calls++;
  pthread_cond_broadcast(&done.cv);
  pthread_mutex_unlock(&done.mu);
}
static void done_user(void *userdata, ferry_user_t *user, const ferry_error_t *e) {
  done.user = user;
  done_status(userdata, e);
}
static void done_open(void *userdata, ferry_sync_session_t *session, ferry_db_t *db, const ferry_error_t *e) {
  done.session = session;
  done.db = db;
  done_status(userdata, e);
}
/* Waits for the next completion (CLOCK_REALTIME: the static initialiser's clock); its code. */
static int done_wait(int before) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 60;
  pthread_mutex_lock(&done.mu);
  while (done.calls == before)
    if (pthread_cond_timedwait(&done.cv, &done.mu, &deadline) == ETIMEDOUT) break;
  int code = done.calls > before ? done.code : -9999;
  pthread_mutex_unlock(&done.mu);
  CHECKF(code != -9999, "no completion within 60 s");
  return code;
}
static int done_calls(void) {
  pthread_mutex_lock(&done.mu);
  int n = done.calls;
  pthread_mutex_unlock(&done.mu);
  return n;
}

/* Every App function on a bad App handle: FERRY_ERR_INVALID_HANDLE, out-parameters untouched,
 * no callback; a failing error-handler registration still runs userdata_free, once. */
static void app_fns_fail(ferry_app_t *bad, const char *what) {
  ferry_credentials_t anon = {FERRY_CREDENTIALS_ANONYMOUS, NULL, NULL, NULL};
  ferry_user_t *u = (ferry_user_t *)&u;
  size_t n = 777;
  CHECKF(ferry_app_log_in(bad, &anon, stray_user, NULL) == FERRY_ERR_INVALID_HANDLE, "ferry_app_log_in on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_app_register_email(bad, "a@example.com", "password123", stray_status, NULL) == FERRY_ERR_INVALID_HANDLE,
         "ferry_app_register_email on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_app_log_out(bad, NULL, stray_status, NULL) == FERRY_ERR_INVALID_HANDLE, "ferry_app_log_out on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_app_current_user(&u, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_app_current_user on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_app_user_count(&n, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_app_user_count on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_app_get_user(&u, bad, 0) == FERRY_ERR_INVALID_HANDLE, "ferry_app_get_user on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECK(u == (ferry_user_t *)&u && n == 777);
  CHECKF(ferry_app_reconnect(bad) == FERRY_ERR_INVALID_HANDLE, "ferry_app_reconnect on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_app_handle_client_reset(bad, test_path("no-reset.ferry")) == FERRY_ERR_INVALID_HANDLE,
         "ferry_app_handle_client_reset on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  int before = frees_now();
  CHECKF(ferry_app_set_sync_error_handler(bad, stray_sync_error, NULL, count_free) == FERRY_ERR_INVALID_HANDLE,
         "ferry_app_set_sync_error_handler on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  /* ferry.h's convention: userdata_free runs, once, before a failing registration returns. */
  int ran = frees_now() - before;
  CHECKF(ran == 1, "ferry_app_set_sync_error_handler on %s failed: userdata_free ran %d times, expected once", what, ran);
}

static void stray_remote_find(void *userdata, ferry_remote_results_t *r, const ferry_error_t *e) {
  (void)userdata;
  (void)r;
  (void)e;
  __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
}

static void stray_remote_count(void *userdata, uint64_t n, const ferry_error_t *e) {
  (void)userdata;
  (void)n;
  (void)e;
  __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
}

/* The remote results functions on something that is not remote results (the handle is also
 * passed as a user elsewhere; as results it must be refused all the same). */
static void remote_results_fns_fail(const ferry_remote_results_t *bad, const char *what) {
  size_t n = 777;
  const char *text = (const char *)&text;
  bool is_list = true;
  ferry_value_t v = {.type = 777};
  const ferry_value_t *list = (const ferry_value_t *)&list;
  CHECKF(ferry_remote_results_count(&n, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_remote_results_count on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_remote_results_json(&text, bad, 0) == FERRY_ERR_INVALID_HANDLE, "ferry_remote_results_json on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_remote_results_field_count(&n, bad, 0) == FERRY_ERR_INVALID_HANDLE, "ferry_remote_results_field_count on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_remote_results_field(&text, &is_list, bad, 0, 0) == FERRY_ERR_INVALID_HANDLE, "ferry_remote_results_field on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_remote_results_get_value(&v, bad, 0, "_id") == FERRY_ERR_INVALID_HANDLE, "ferry_remote_results_get_value on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_remote_results_get_list(&list, &n, bad, 0, "_id") == FERRY_ERR_INVALID_HANDLE, "ferry_remote_results_get_list on %s",
         what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECK(n == 777 && text == (const char *)&text && is_list && v.type == 777 && list == (const ferry_value_t *)&list);
  ferry_remote_results_free((ferry_remote_results_t *)bad); /* not remote results: left alone */
}

static void user_fns_fail(const ferry_user_t *bad, const char *what) {
  const char *id = (const char *)&id;
  int32_t state = 777;
  CHECKF(ferry_user_id(&id, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_user_id on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_user_state(&state, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_user_state on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECK(id == (const char *)&id && state == 777);
  int before = __atomic_load_n(&calls, __ATOMIC_SEQ_CST);
  CHECKF(ferry_remote_find((ferry_user_t *)bad, "Item", "TRUEPREDICATE", NULL, 0, 10, stray_remote_find, NULL) ==
             FERRY_ERR_INVALID_HANDLE,
         "ferry_remote_find on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_remote_count((ferry_user_t *)bad, "Item", "TRUEPREDICATE", NULL, 0, stray_remote_count, NULL) ==
             FERRY_ERR_INVALID_HANDLE,
         "ferry_remote_count on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(__atomic_load_n(&calls, __ATOMIC_SEQ_CST) == before, "a failed remote call on %s called back", what);
  remote_results_fns_fail((const ferry_remote_results_t *)bad, what);
}

static void session_fns_fail(ferry_sync_session_t *bad, const ferry_subscription_set_t *set, const char *what) {
  ferry_subscription_set_t *out = (ferry_subscription_set_t *)&out;
  uint64_t v = 777;
  CHECKF(ferry_sync_wait_for_upload(bad, stray_status, NULL) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_wait_for_upload on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_wait_for_download(bad, stray_status, NULL) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_wait_for_download on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_wait_for_receipt(bad, 1, FERRY_RECEIPT_ACKNOWLEDGED, stray_receipt, NULL) == FERRY_ERR_INVALID_HANDLE,
         "ferry_sync_wait_for_receipt on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_wait_for_subscriptions(bad, 1, stray_status, NULL) == FERRY_ERR_INVALID_HANDLE,
         "ferry_sync_wait_for_subscriptions on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_subscriptions(&out, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_subscriptions on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_update_subscriptions(&v, bad, set) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_update_subscriptions on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECK(out == (ferry_subscription_set_t *)&out && v == 777);
  /* session state and control */
  int32_t state = 777;
  CHECKF(ferry_sync_connection_state(&state, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_connection_state on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_session_state(&state, bad) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_session_state on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECK(state == 777);
  CHECKF(ferry_sync_suspend(bad) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_suspend on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(ferry_sync_resume(bad) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_resume on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  /* registrations: the handed-over userdata is freed once, before the failing call returns */
  ferry_connection_state_token_t *ct = (ferry_connection_state_token_t *)&ct;
  ferry_progress_token_t *pt = (ferry_progress_token_t *)&pt;
  int before = frees_now();
  CHECKF(ferry_sync_observe_connection_state(&ct, bad, stray_state, NULL, count_free) == FERRY_ERR_INVALID_HANDLE,
         "ferry_sync_observe_connection_state on %s", what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  CHECKF(frees_now() == before + 1, "ferry_sync_observe_connection_state on %s failed: userdata_free ran %d times, expected once",
         what, frees_now() - before);
  for (int32_t direction = 0; direction <= 1; direction++)
    for (int32_t mode = 0; mode <= 1; mode++) {
      before = frees_now();
      CHECKF(ferry_sync_observe_progress(&pt, bad, direction, mode, stray_progress, NULL, count_free) == FERRY_ERR_INVALID_HANDLE,
             "ferry_sync_observe_progress(%d, %d) on %s", direction, mode, what);
      CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
      CHECKF(frees_now() == before + 1, "ferry_sync_observe_progress on %s failed: userdata_free ran %d times, expected once",
             what, frees_now() - before);
    }
  /* without a userdata_free there is nothing to run */
  CHECKF(ferry_sync_observe_connection_state(&ct, bad, stray_state, NULL, NULL) == FERRY_ERR_INVALID_HANDLE,
         "ferry_sync_observe_connection_state on %s without userdata_free", what);
  CHECKF(ferry_sync_observe_progress(&pt, bad, FERRY_PROGRESS_UPLOAD, FERRY_PROGRESS_FOR_CURRENT_WORK, stray_progress, NULL,
                                     NULL) == FERRY_ERR_INVALID_HANDLE,
         "ferry_sync_observe_progress on %s without userdata_free", what);
  CHECK(ct == (ferry_connection_state_token_t *)&ct && pt == (ferry_progress_token_t *)&pt);
  CHECKF(ferry_sync_write_copy(bad, test_path("never-written-copy.ferry")) == FERRY_ERR_INVALID_HANDLE, "ferry_sync_write_copy on %s",
         what);
  CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);
  struct stat st;
  CHECK(stat(test_path("never-written-copy.ferry"), &st) != 0);
}

/* ferry_sync_open_async with arguments that make the call itself fail with `code`: the
 * completion never runs (checked later, after a barrier) and nothing is opened. */
static void open_async_fails(ferry_user_t *user, const ferry_sync_options_t *opts, ferry_sync_open_cb cb, int code,
                             const char *what) {
  int rc = ferry_sync_open_async(user, opts, cb, NULL);
  CHECKF(rc == code, "ferry_sync_open_async with %s returned %d (%s), expected %d (%s)", what, rc, ferry_strerror(rc), code,
         ferry_strerror(code));
  CHECK_LAST_ERROR(code);
}

/* Wrong-kind and freed token handles given to the token free functions are no-ops. */
static void token_frees_are_noops(void *handle) {
  ferry_connection_state_token_free((ferry_connection_state_token_t *)handle);
  ferry_progress_token_free((ferry_progress_token_t *)handle);
}

static void set_fns_fail(ferry_subscription_set_t *bad, const char *what) {
  uint64_t v = 777;
  int32_t state = 777;
  const char *s1 = (const char *)&v, *s2 = s1, *s3 = s1;
  size_t n = 777;
  bool removed = true;
#define SET_FAILS(call)                                                                          \
  do {                                                                                           \
    int rc_ = (call);                                                                            \
    CHECKF(rc_ == FERRY_ERR_INVALID_HANDLE, "%s on %s returned %d (%s)", #call, what, rc_, ferry_strerror(rc_)); \
    CHECK_LAST_ERROR(FERRY_ERR_INVALID_HANDLE);                                                  \
  } while (0)
  SET_FAILS(ferry_subscription_set_version(&v, bad));
  SET_FAILS(ferry_subscription_set_state(&state, bad));
  SET_FAILS(ferry_subscription_set_error(&s1, bad));
  SET_FAILS(ferry_subscription_set_count(&n, bad));
  SET_FAILS(ferry_subscription_set_get(&s1, &s2, &s3, bad, 0));
  SET_FAILS(ferry_subscription_set_add(bad, "items", "Item", "TRUEPREDICATE"));
  SET_FAILS(ferry_subscription_set_remove(&removed, bad, "items"));
  SET_FAILS(ferry_subscription_set_remove_type(&n, bad, "Item"));
  SET_FAILS(ferry_subscription_set_remove_all(bad));
#undef SET_FAILS
  CHECK(v == 777 && state == 777 && s1 == (const char *)&v && s2 == s1 && s3 == s1 && n == 777 && removed);
}

static ferry_app_t *new_app(const char *dir, const char *url) {
  ferry_app_options_t o;
  CHECK_OK(ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION));
  o.app_id = "item-app-seeds";
  o.base_url = url;
  o.base_directory = dir;
  o.log_level = FERRY_LOG_OFF;
  ferry_app_t *app = NULL;
  CHECK_OK(ferry_app_new(&app, &o));
  return app;
}

static void test_sync_bad_args(ferry_db_t *db, ferry_schema_t *schema, ferry_results_t *results,
                               ferry_object_t *object, ferry_notification_token_t *token) {
  /* options */
  ferry_app_options_t o, sentinel;
  memset(&sentinel, 0xa5, sizeof sentinel);
  CHECK_ERR(ferry_app_options_init(NULL, FERRY_APP_OPTIONS_VERSION), FERRY_ERR_INVALID_ARGUMENT);
  /* versions 1 to FERRY_APP_OPTIONS_VERSION are known; 0 and the later ones are not */
  const uint32_t bad_versions[] = {0, FERRY_APP_OPTIONS_VERSION + 1, 1000, UINT32_MAX};
  for (size_t i = 0; i < 4; i++) {
    o = sentinel;
    CHECK_ERR(ferry_app_options_init(&o, bad_versions[i]), FERRY_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&o, &sentinel, sizeof o) == 0);
  }
  CHECK_OK(ferry_app_options_init(&o, FERRY_APP_OPTIONS_VERSION));
  CHECK_EQ_INT(o.version, FERRY_APP_OPTIONS_VERSION);
  CHECK(o.app_id == NULL && o.base_url == NULL && o.base_directory == NULL && o.ca_file == NULL);
  /* the security fields default to false, their zero value: verify, refuse remote http */
  CHECK(!o.reserved && !o.insecure_skip_verify && !o.allow_insecure_http);
  CHECK_EQ_INT(o.request_timeout_ms, 60000);
  CHECK_EQ_INT(o.log_level, FERRY_LOG_INFO);
  CHECK(o.log_callback == NULL && o.log_userdata == NULL);
  /* version 2's fields and their documented defaults */
  CHECK(o.multiplex_sessions);
  CHECK_EQ_INT(o.read_timeout_ms, 120000);
  CHECK_EQ_INT(o.ping_interval_ms, 60000);
  CHECK_EQ_INT(o.reconnect_delay_min_ms, 1000);
  CHECK_EQ_INT(o.reconnect_delay_max_ms, 16000);
  /* a version-1 host's struct ends at log_userdata: init writes nothing after it */
  const size_t app_v1_size = offsetof(ferry_app_options_t, multiplex_sessions);
  {
    ferry_app_options_t v1 = sentinel;
    CHECK_OK(ferry_app_options_init(&v1, 1));
    CHECK_EQ_INT(v1.version, 1);
    /* reserved is what a version-1 host reads as verify_peer: true, as it is (never read) */
    CHECK(v1.reserved && v1.request_timeout_ms == 60000 && v1.log_level == FERRY_LOG_INFO && v1.app_id == NULL);
    CHECKF(memcmp((const char *)&v1 + app_v1_size, (const char *)&sentinel + app_v1_size, sizeof v1 - app_v1_size) == 0,
           "ferry_app_options_init(version 1) wrote past the version-1 struct");
  }
  /* a version-3 host's struct ends at encryption_key: init writes nothing after it */
  const size_t app_v3_size = offsetof(ferry_app_options_t, insecure_skip_verify);
  {
    ferry_app_options_t v3 = sentinel;
    CHECK_OK(ferry_app_options_init(&v3, 3));
    CHECK_EQ_INT(v3.version, 3);
    CHECK(v3.reserved && v3.multiplex_sessions && v3.encryption_key == NULL);
    CHECKF(memcmp((const char *)&v3 + app_v3_size, (const char *)&sentinel + app_v3_size, sizeof v3 - app_v3_size) == 0,
           "ferry_app_options_init(version 3) wrote past the version-3 struct");
  }

  char dir[640];
  snprintf(dir, sizeof dir, "%s", test_path("sync-app"));
  CHECK(mkdir(dir, 0700) == 0);
  ferry_app_options_t good = o;
  good.app_id = "item-app-seeds";
  good.base_url = "http://127.0.0.1:9";
  good.base_directory = dir;
  ferry_app_t *app = (ferry_app_t *)&app;
  ferry_app_t *const untouched = app;
  CHECK_ERR(ferry_app_new(NULL, &good), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_new(&app, NULL), FERRY_ERR_INVALID_ARGUMENT);
  for (size_t i = 0; i < 4; i++) {
    o = good;
    o.version = bad_versions[i];
    CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  }
  o = good;
  o.app_id = NULL;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o.app_id = "";
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o = good;
  o.base_url = NULL;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  const char *const bad_urls[] = {"", "not a url", "ftp://127.0.0.1:21", "127.0.0.1:80", "http://", "ws://127.0.0.1:1",
                                  "http://127.0.0.1:99999", "http://[::1", "http://example.com:80"};
  for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
    o = good;
    o.base_url = bad_urls[i];
    int rc = ferry_app_new(&app, &o);
    CHECKF(rc == FERRY_ERR_INVALID_ARGUMENT, "ferry_app_new with base_url \"%s\" returned %d (%s)", bad_urls[i], rc,
           ferry_strerror(rc));
    if (rc == FERRY_OK) {
      ferry_app_free(app);
      app = untouched;
    } else {
      CHECK_LAST_ERROR(FERRY_ERR_INVALID_ARGUMENT);
    }
  }
  o = good;
  o.base_directory = NULL;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o.base_directory = test_path("no-such-dir/deeper");
  /* "required, must exist": a bad option, or a directory that cannot be used */
  CHECK_ERR_ANY(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_IO);
  const int32_t bad_levels[] = {-1, FERRY_LOG_OFF + 1, 100, INT32_MIN};
  for (size_t i = 0; i < 4; i++) {
    o = good;
    o.log_level = bad_levels[i];
    CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  }
  o = good;
  o.request_timeout_ms = 0;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  /* version 2: zero timeouts and delays, a backoff cap below its minimum */
  o = good;
  o.read_timeout_ms = 0;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o = good;
  o.ping_interval_ms = 0;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o = good;
  o.reconnect_delay_min_ms = 0;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o = good;
  o.reconnect_delay_max_ms = 0;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  o = good;
  o.reconnect_delay_min_ms = 2000;
  o.reconnect_delay_max_ms = 1999;
  CHECK_ERR(ferry_app_new(&app, &o), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(app == untouched);
  {
    /* a version-1 struct whose memory after log_userdata is garbage (a v1 host did not
       allocate it): accepted, the fields after it take their defaults (never read) */
    ferry_app_options_t v1 = sentinel;
    memcpy(&v1, &good, app_v1_size);
    v1.version = 1;
    ferry_app_t *a1 = NULL;
    CHECK_OK(ferry_app_new(&a1, &v1));
    CHECK_OK(ferry_app_reconnect(a1)); /* no connection: nothing to do */
    ferry_app_free(a1);
    /* and a version-2 struct with the same bytes is read in full: garbage defaults fail or
       are taken as given, never a crash */
    v1.version = 2;
    a1 = NULL;
    CHECK_ERR_ANY(ferry_app_new(&a1, &v1), FERRY_OK, FERRY_ERR_INVALID_ARGUMENT);
    ferry_app_free(a1);
    /* a version-3 struct with garbage after encryption_key (bytes a version-4 struct would
       read as true in its opt-outs): never read, so a remote http URL is still refused */
    ferry_app_options_t v3 = sentinel;
    memcpy(&v3, &good, app_v3_size);
    v3.version = 3;
    a1 = NULL;
    CHECK_OK(ferry_app_new(&a1, &v3));
    ferry_app_free(a1);
    v3.base_url = "http://example.com";
    a1 = NULL;
    CHECK_ERR(ferry_app_new(&a1, &v3), FERRY_ERR_INVALID_ARGUMENT);
    CHECK(a1 == NULL);
  }

  /* wrong kinds and NULL for every App function */
  app_fns_fail(NULL, "NULL");
  app_fns_fail((ferry_app_t *)db, "a db handle");
  app_fns_fail((ferry_app_t *)schema, "a schema handle");
  app_fns_fail((ferry_app_t *)results, "a results handle");
  app_fns_fail((ferry_app_t *)token, "a token handle");
  user_fns_fail(NULL, "NULL");
  user_fns_fail((ferry_user_t *)db, "a db handle");
  user_fns_fail((ferry_user_t *)object, "an object handle");
  ferry_subscription_set_t *no_set = NULL;
  session_fns_fail(NULL, no_set, "NULL");
  session_fns_fail((ferry_sync_session_t *)db, no_set, "a db handle");
  session_fns_fail((ferry_sync_session_t *)results, no_set, "a results handle");
  set_fns_fail(NULL, "NULL");
  set_fns_fail((ferry_subscription_set_t *)db, "a db handle");
  set_fns_fail((ferry_subscription_set_t *)schema, "a schema handle");

  /* a real App (nothing listens at its URL) with bad arguments */
  app = new_app(dir, "http://127.0.0.1:9");
  app_fns_fail((ferry_app_t *)NULL, "NULL (with an App alive)");
  user_fns_fail((ferry_user_t *)app, "an app handle");
  session_fns_fail((ferry_sync_session_t *)app, no_set, "an app handle");
  set_fns_fail((ferry_subscription_set_t *)app, "an app handle");
  all_db_fns_fail((ferry_db_t *)app, FERRY_ERR_INVALID_HANDLE, "an app handle");
  results_fns_fail((ferry_results_t *)app, FERRY_ERR_INVALID_HANDLE, "an app handle");
  object_fns_fail((ferry_object_t *)app, FERRY_ERR_INVALID_HANDLE, "an app handle");
  ferry_credentials_t anon = {FERRY_CREDENTIALS_ANONYMOUS, NULL, NULL, NULL};
  CHECK_ERR(ferry_app_log_in(app, NULL, stray_user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_log_in(app, &anon, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  const int32_t bad_kinds[] = {-1, 4, 99, INT32_MAX};
  for (size_t i = 0; i < 4; i++) {
    ferry_credentials_t c = {bad_kinds[i], "a@example.com", "password123", "token"};
    CHECK_ERR(ferry_app_log_in(app, &c, stray_user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  }
  ferry_credentials_t no_email = {FERRY_CREDENTIALS_EMAIL_PASSWORD, NULL, "password123", NULL};
  ferry_credentials_t no_password = {FERRY_CREDENTIALS_EMAIL_PASSWORD, "a@example.com", NULL, NULL};
  ferry_credentials_t no_jwt = {FERRY_CREDENTIALS_JWT, NULL, NULL, NULL};
  ferry_credentials_t no_key = {FERRY_CREDENTIALS_API_KEY, NULL, NULL, NULL};
  CHECK_ERR(ferry_app_log_in(app, &no_email, stray_user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_log_in(app, &no_password, stray_user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_log_in(app, &no_jwt, stray_user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_log_in(app, &no_key, stray_user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_register_email(app, NULL, "password123", stray_status, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_register_email(app, "a@example.com", NULL, stray_status, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_register_email(app, "a@example.com", "password123", NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_log_out(app, NULL, stray_status, NULL), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_app_log_out(app, (ferry_user_t *)db, stray_status, NULL), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_app_log_out(app, (ferry_user_t *)app, stray_status, NULL), FERRY_ERR_INVALID_HANDLE);
  ferry_user_t *u = (ferry_user_t *)&u;
  size_t n = 777;
  CHECK_ERR(ferry_app_current_user(NULL, app), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_app_current_user(&u, app));
  CHECK(u == NULL);
  CHECK_ERR(ferry_app_user_count(NULL, app), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_app_user_count(&n, app));
  CHECK_EQ_INT(n, 0);
  u = (ferry_user_t *)&u;
  CHECK_ERR(ferry_app_get_user(NULL, app, 0), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_get_user(&u, app, 0), FERRY_ERR_OUT_OF_RANGE);
  CHECK_ERR(ferry_app_get_user(&u, app, SIZE_MAX), FERRY_ERR_OUT_OF_RANGE);
  CHECK(u == (ferry_user_t *)&u);
  /* the error handler: a replaced or cleared registration frees its userdata once */
  int before = frees_now();
  CHECK_OK(ferry_app_set_sync_error_handler(app, stray_sync_error, NULL, count_free));
  CHECK_OK(ferry_app_set_sync_error_handler(app, stray_sync_error, NULL, count_free));
  CHECK_EQ_INT(frees_now(), before + 1);
  CHECK_OK(ferry_app_set_sync_error_handler(app, NULL, NULL, NULL));
  CHECK_EQ_INT(frees_now(), before + 2);
  CHECK_OK(ferry_app_set_sync_error_handler(app, stray_sync_error, NULL, count_free));
  /* sync options */
  ferry_sync_options_t so, so_sentinel;
  memset(&so_sentinel, 0xa5, sizeof so_sentinel);
  CHECK_ERR(ferry_sync_options_init(NULL, FERRY_SYNC_OPTIONS_VERSION), FERRY_ERR_INVALID_ARGUMENT);
  const uint32_t sync_bad_versions[] = {0, FERRY_SYNC_OPTIONS_VERSION + 1, 1000, UINT32_MAX};
  for (size_t i = 0; i < 4; i++) {
    so = so_sentinel;
    CHECK_ERR(ferry_sync_options_init(&so, sync_bad_versions[i]), FERRY_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&so, &so_sentinel, sizeof so) == 0);
  }
  CHECK_OK(ferry_sync_options_init(&so, FERRY_SYNC_OPTIONS_VERSION));
  CHECK(so.version == FERRY_SYNC_OPTIONS_VERSION && so.path == NULL && so.schema == NULL);
  /* version 2's fields and their documented defaults */
  CHECK_EQ_INT(so.download_before_open, FERRY_DOWNLOAD_BEFORE_OPEN_NEVER);
  CHECK_EQ_INT(so.open_timeout_ms, 30000);
  CHECK(!so.in_memory && so.initial_subscriptions == NULL && so.initial_subscriptions_userdata == NULL &&
        !so.rerun_initial_subscriptions);
  const size_t sync_v1_size = offsetof(ferry_sync_options_t, download_before_open);
  ferry_sync_options_t so_v1 = so_sentinel;
  CHECK_OK(ferry_sync_options_init(&so_v1, 1));
  CHECK(so_v1.version == 1 && so_v1.path == NULL && so_v1.schema == NULL);
  CHECKF(memcmp((const char *)&so_v1 + sync_v1_size, (const char *)&so_sentinel + sync_v1_size, sizeof so_v1 - sync_v1_size) == 0,
         "ferry_sync_options_init(version 1) wrote past the version-1 struct");
  /* version 3's fields (client reset) and their defaults; a version-2 init stops before them */
  CHECK_EQ_INT(so.client_reset_mode, FERRY_CLIENT_RESET_RECOVER_UNSYNCED_CHANGES);
  CHECK(so.before_reset == NULL && so.before_reset_userdata == NULL && so.after_reset == NULL && so.after_reset_userdata == NULL);
  const size_t sync_v2_size = offsetof(ferry_sync_options_t, client_reset_mode);
  ferry_sync_options_t so_v2 = so_sentinel;
  CHECK_OK(ferry_sync_options_init(&so_v2, 2));
  CHECK(so_v2.version == 2 && so_v2.open_timeout_ms == 30000);
  CHECKF(memcmp((const char *)&so_v2 + sync_v2_size, (const char *)&so_sentinel + sync_v2_size, sizeof so_v2 - sync_v2_size) == 0,
         "ferry_sync_options_init(version 2) wrote past the version-2 struct");
  static char sync_path[700]; /* a copy: test_path's ring of buffers is reused by later calls */
  snprintf(sync_path, sizeof sync_path, "%s", test_path("sync-bad.ferry"));
  so.path = sync_path;
  so.schema = schema;
  ferry_sync_session_t *session = (ferry_sync_session_t *)&session;
  ferry_db_t *sdb = (ferry_db_t *)&sdb;
  const ferry_user_t *bad_users[] = {NULL, (ferry_user_t *)db, (ferry_user_t *)app, (ferry_user_t *)schema};
  for (size_t i = 0; i < 4; i++) {
    CHECK_ERR(ferry_sync_open(&session, &sdb, (ferry_user_t *)bad_users[i], &so), FERRY_ERR_INVALID_HANDLE);
    open_async_fails((ferry_user_t *)bad_users[i], &so, stray_open, FERRY_ERR_INVALID_HANDLE, "a bad user handle");
  }
  CHECK(session == (ferry_sync_session_t *)&session && sdb == (ferry_db_t *)&sdb);
  /* wrong-kind frees are no-ops: the App still works */
  ferry_user_free((ferry_user_t *)app);
  ferry_sync_session_free((ferry_sync_session_t *)app);
  ferry_subscription_set_free((ferry_subscription_set_t *)app);
  ferry_app_free((ferry_app_t *)db);
  ferry_app_free((ferry_app_t *)schema);
  CHECK_OK(ferry_app_user_count(&n, app));
  CHECK_OK(ferry_db_class_count(&n, db));

  /* with a server: a real user, session and subscription set */
  if (!server_start()) {
    printf("test_bad_args: note: %s: the checks that need a user and a session are skipped\n", server_skip_reason);
    before = frees_now();
    ferry_app_free(app);
    CHECK_EQ_INT(frees_now(), before + 1);
    app_fns_fail(app, "a freed app");
    return;
  }
  char live_dir[640];
  snprintf(live_dir, sizeof live_dir, "%s", test_path("sync-app-live"));
  CHECK(mkdir(live_dir, 0700) == 0);
  ferry_app_t *live = new_app(live_dir, base_url);
  int calls = done_calls();
  CHECK_OK(ferry_app_log_in(live, &anon, done_user, NULL));
  CHECK_EQ_INT(done_wait(calls), FERRY_OK);
  ferry_user_t *user = done.user;
  CHECK(user != NULL);
  const char *id = NULL;
  int32_t state = -1;
  CHECK_ERR(ferry_user_id(NULL, user), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_user_state(NULL, user), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_user_id(&id, user));
  CHECK_OK(ferry_user_state(&state, user));
  CHECK_EQ_INT(state, FERRY_USER_LOGGED_IN);
  CHECK_ERR(ferry_app_log_out(live, user, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  /* a user of another App */
  CHECK_ERR(ferry_app_log_out(app, user, stray_status, NULL), FERRY_ERR_INVALID_ARGUMENT);
  app_fns_fail((ferry_app_t *)user, "a user handle");
  /* ferry_app_handle_client_reset's token: NULL, no file, a file with no reset pending */
  CHECK_ERR(ferry_app_handle_client_reset(live, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_app_handle_client_reset(live, ""), FERRY_ERR_NOT_FOUND);
  CHECK_ERR(ferry_app_handle_client_reset(live, test_path("no-such-file.ferry")), FERRY_ERR_NOT_FOUND);
  session_fns_fail((ferry_sync_session_t *)user, no_set, "a user handle");
  set_fns_fail((ferry_subscription_set_t *)user, "a user handle");
  all_db_fns_fail((ferry_db_t *)user, FERRY_ERR_INVALID_HANDLE, "a user handle");

  open_async_fails((ferry_user_t *)app, &so, stray_open, FERRY_ERR_INVALID_HANDLE, "an app handle as the user");
  /* ferry_sync_open's arguments (and ferry_sync_open_async's) */
  open_async_fails(user, NULL, stray_open, FERRY_ERR_INVALID_ARGUMENT, "NULL options");
  open_async_fails(user, &so, NULL, FERRY_ERR_INVALID_ARGUMENT, "a NULL callback");
  CHECK_ERR(ferry_sync_open(NULL, &sdb, user, &so), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_open(&session, NULL, user, &so), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, NULL), FERRY_ERR_INVALID_ARGUMENT);
  ferry_sync_options_t so2 = so;
  for (size_t i = 0; i < 4; i++) {
    so2.version = sync_bad_versions[i];
    CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
    open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "an unknown options version");
  }
  /* download before open: ALWAYS and ONCE need ferry_sync_open_async; unknown values */
  so2 = so;
  so2.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
  so2.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ONCE;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
  const int32_t bad_download[] = {-1, FERRY_DOWNLOAD_BEFORE_OPEN_ONCE + 1, 99, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_download / sizeof bad_download[0]; i++) {
    so2.download_before_open = bad_download[i];
    CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
    open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "an unknown download_before_open");
  }
  /* unknown client reset modes */
  so2 = so;
  const int32_t bad_reset_modes[] = {-1, FERRY_CLIENT_RESET_MANUAL + 1, 99, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad_reset_modes / sizeof bad_reset_modes[0]; i++) {
    so2.client_reset_mode = bad_reset_modes[i];
    CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
    open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "an unknown client_reset_mode");
  }
  /* a zero open timeout, with or without a download first */
  so2 = so;
  so2.open_timeout_ms = 0;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
  open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "open_timeout_ms 0");
  so2.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS;
  open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "ALWAYS with open_timeout_ms 0");
  so2.download_before_open = FERRY_DOWNLOAD_BEFORE_OPEN_ONCE;
  open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "ONCE with open_timeout_ms 0");
  so2 = so;
  so2.schema = NULL;
  open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "a NULL schema");
  so2.schema = (const ferry_schema_t *)db;
  open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_HANDLE, "a db handle as the schema");
  so2 = so;
  so2.path = NULL;
  open_async_fails(user, &so2, stray_open, FERRY_ERR_INVALID_ARGUMENT, "a NULL path");
  so2 = so;
  so2.path = NULL;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
  so2 = so;
  so2.schema = NULL;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_ARGUMENT);
  so2.schema = (const ferry_schema_t *)db;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_HANDLE);
  so2.schema = (const ferry_schema_t *)user;
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_INVALID_HANDLE);
  so2 = so;
  so2.path = test_path("no-such-dir/x.ferry");
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so2), FERRY_ERR_IO);
  CHECK(session == (ferry_sync_session_t *)&session && sdb == (ferry_db_t *)&sdb);
  struct stat st;
  CHECK(stat(so.path, &st) != 0); /* none of this created the file */

  /* opened with a version-1 struct whose memory after schema is garbage (a v1 host did not
     allocate it: a garbage initial_subscriptions pointer would crash if it were read) */
  so_v1.path = so.path;
  so_v1.schema = schema;
  CHECK_OK(ferry_sync_open(&session, &sdb, user, &so_v1));
  all_db_fns_fail((ferry_db_t *)session, FERRY_ERR_INVALID_HANDLE, "a session handle");
  app_fns_fail((ferry_app_t *)session, "a session handle");
  user_fns_fail((ferry_user_t *)session, "a session handle");
  CHECK_ERR(ferry_sync_wait_for_upload(session, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_wait_for_download(session, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_wait_for_subscriptions(session, 1, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  /* receipts: no callback, an unknown state, a receipt the file never gave */
  CHECK_ERR(ferry_sync_wait_for_receipt(session, 0, FERRY_RECEIPT_ACKNOWLEDGED, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_wait_for_receipt(session, 0, 4, stray_receipt, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_wait_for_receipt(session, 0, -1, stray_receipt, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_sync_wait_for_receipt(session, 123456789, FERRY_RECEIPT_LOCAL, stray_receipt, NULL), FERRY_ERR_NOT_FOUND);
  CHECK_ERR(ferry_sync_subscriptions(NULL, session), FERRY_ERR_INVALID_ARGUMENT);
  /* session state and control: NULL outs, NULL callbacks, unknown directions and modes */
  {
    int32_t state = 777;
    CHECK_ERR(ferry_sync_connection_state(NULL, session), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_sync_session_state(NULL, session), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_OK(ferry_sync_connection_state(&state, session));
    CHECKF(state == FERRY_CONNECTION_DISCONNECTED || state == FERRY_CONNECTION_CONNECTING || state == FERRY_CONNECTION_CONNECTED,
           "connection state %d", state);
    CHECK_OK(ferry_sync_session_state(&state, session));
    CHECK_EQ_INT(state, FERRY_SESSION_ACTIVE);
    ferry_connection_state_token_t *ct = (ferry_connection_state_token_t *)&ct;
    ferry_progress_token_t *pt = (ferry_progress_token_t *)&pt;
    before = frees_now();
    CHECK_ERR(ferry_sync_observe_connection_state(NULL, session, stray_state, NULL, count_free), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_sync_observe_connection_state(&ct, session, NULL, NULL, count_free), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(frees_now(), before + 2);
    CHECK_ERR(ferry_sync_observe_connection_state(&ct, session, NULL, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
    before = frees_now();
    CHECK_ERR(ferry_sync_observe_progress(NULL, session, FERRY_PROGRESS_UPLOAD, FERRY_PROGRESS_REPORT_INDEFINITELY, stray_progress,
                                          NULL, count_free),
              FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_sync_observe_progress(&pt, session, FERRY_PROGRESS_DOWNLOAD, FERRY_PROGRESS_FOR_CURRENT_WORK, NULL, NULL,
                                          count_free),
              FERRY_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(frees_now(), before + 2);
    const int32_t bad_directions[] = {-1, FERRY_PROGRESS_DOWNLOAD + 1, 99, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_directions / sizeof bad_directions[0]; i++) {
      before = frees_now();
      CHECK_ERR(ferry_sync_observe_progress(&pt, session, bad_directions[i], FERRY_PROGRESS_REPORT_INDEFINITELY, stray_progress,
                                            NULL, count_free),
                FERRY_ERR_INVALID_ARGUMENT);
      CHECKF(frees_now() == before + 1, "progress direction %d: userdata_free ran %d times, expected once", bad_directions[i],
             frees_now() - before);
    }
    const int32_t bad_modes[] = {-1, FERRY_PROGRESS_FOR_CURRENT_WORK + 1, 99, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
      before = frees_now();
      CHECK_ERR(ferry_sync_observe_progress(&pt, session, FERRY_PROGRESS_UPLOAD, bad_modes[i], stray_progress, NULL, count_free),
                FERRY_ERR_INVALID_ARGUMENT);
      CHECKF(frees_now() == before + 1, "progress mode %d: userdata_free ran %d times, expected once", bad_modes[i],
             frees_now() - before);
    }
    CHECK_ERR(ferry_sync_observe_progress(&pt, session, 7, 7, stray_progress, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK(ct == (ferry_connection_state_token_t *)&ct && pt == (ferry_progress_token_t *)&pt);
    /* suspend and resume twice each: the second of each is a no-op */
    CHECK_OK(ferry_sync_suspend(session));
    CHECK_OK(ferry_sync_suspend(session));
    CHECK_OK(ferry_sync_resume(session));
    CHECK_OK(ferry_sync_resume(session));
    CHECK_OK(ferry_app_reconnect(live));
    /* a synced copy: a NULL path, or one that exists (the session's own file) */
    CHECK_ERR(ferry_sync_write_copy(session, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_sync_write_copy(session, so.path), FERRY_ERR_INVALID_ARGUMENT);
  }
  /* live tokens: wrong kinds for every other function, and other kinds for their frees */
  ferry_connection_state_token_t *ctoken = NULL, *ctoken_outlives = NULL;
  ferry_progress_token_t *ptoken = NULL, *ptoken_outlives = NULL;
  CHECK_OK(ferry_sync_observe_connection_state(&ctoken, session, live_state, NULL, count_loop_free));
  CHECK_OK(ferry_sync_observe_connection_state(&ctoken_outlives, session, live_state, NULL, count_loop_free));
  CHECK_OK(ferry_sync_observe_progress(&ptoken, session, FERRY_PROGRESS_UPLOAD, FERRY_PROGRESS_REPORT_INDEFINITELY, live_progress,
                                       NULL, count_loop_free));
  CHECK_OK(ferry_sync_observe_progress(&ptoken_outlives, session, FERRY_PROGRESS_DOWNLOAD, FERRY_PROGRESS_FOR_CURRENT_WORK,
                                       live_progress, NULL, count_loop_free));
  CHECK(ctoken != NULL && ptoken != NULL && ctoken_outlives != NULL && ptoken_outlives != NULL);
  session_fns_fail((ferry_sync_session_t *)ctoken, no_set, "a connection state token");
  session_fns_fail((ferry_sync_session_t *)ptoken, no_set, "a progress token");
  app_fns_fail((ferry_app_t *)ctoken, "a connection state token");
  app_fns_fail((ferry_app_t *)ptoken, "a progress token");
  user_fns_fail((ferry_user_t *)ctoken, "a connection state token");
  set_fns_fail((ferry_subscription_set_t *)ptoken, "a progress token");
  all_db_fns_fail((ferry_db_t *)ctoken, FERRY_ERR_INVALID_HANDLE, "a connection state token");
  all_db_fns_fail((ferry_db_t *)ptoken, FERRY_ERR_INVALID_HANDLE, "a progress token");
  results_fns_fail((ferry_results_t *)ptoken, FERRY_ERR_INVALID_HANDLE, "a progress token");
  object_fns_fail((ferry_object_t *)ctoken, FERRY_ERR_INVALID_HANDLE, "a connection state token");
  ferry_connection_state_token_free((ferry_connection_state_token_t *)ptoken);
  ferry_progress_token_free((ferry_progress_token_t *)ctoken);
  ferry_notification_token_free((ferry_notification_token_t *)ctoken);
  ferry_notification_token_free((ferry_notification_token_t *)ptoken);
  token_frees_are_noops(session);
  token_frees_are_noops(live);
  token_frees_are_noops(user);
  token_frees_are_noops(db);
  token_frees_are_noops(token);
  ferry_sync_session_free((ferry_sync_session_t *)ctoken);
  ferry_app_free((ferry_app_t *)ptoken);
  ferry_user_free((ferry_user_t *)ctoken);
  ferry_db_free((ferry_db_t *)ptoken);
  ferry_subscription_set_free((ferry_subscription_set_t *)ctoken);
  CHECK_EQ_INT(loop_frees_now(), 0);
  /* the tokens still work: freeing each runs its userdata_free, once (on the loop thread) */
  ferry_connection_state_token_free(ctoken);
  ferry_progress_token_free(ptoken);
  CHECK_EQ_INT(loop_frees_wait(2), 2);
  token_frees_are_noops(ctoken); /* freed: no-ops, no second userdata_free */
  token_frees_are_noops(ptoken);
  session_fns_fail((ferry_sync_session_t *)ctoken, no_set, "a freed connection state token");
  ferry_subscription_set_t *set = NULL;
  CHECK_OK(ferry_sync_subscriptions(&set, session));
  session_fns_fail((ferry_sync_session_t *)set, set, "a subscription set handle");
  set_fns_fail((ferry_subscription_set_t *)session, "a session handle");
  user_fns_fail((ferry_user_t *)set, "a subscription set handle");
  app_fns_fail((ferry_app_t *)set, "a subscription set handle");
  all_db_fns_fail((ferry_db_t *)set, FERRY_ERR_INVALID_HANDLE, "a subscription set handle");
  /* the set's functions: NULL outs, NULL strings, indices past the end */
  uint64_t version = 777;
  const char *s1 = NULL, *s2 = NULL, *s3 = NULL;
  bool removed = true;
  CHECK_ERR(ferry_subscription_set_version(NULL, set), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_subscription_set_state(NULL, set), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_subscription_set_error(NULL, set), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_subscription_set_count(NULL, set), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_subscription_set_version(&version, set));
  CHECK_EQ_INT(version, 0);
  CHECK_OK(ferry_subscription_set_error(&s1, set));
  CHECK_STREQ(s1, "");
  CHECK_OK(ferry_subscription_set_count(&n, set));
  CHECK_EQ_INT(n, 0);
  CHECK_ERR(ferry_subscription_set_get(&s1, &s2, &s3, set, 0), FERRY_ERR_OUT_OF_RANGE);
  CHECK_ERR(ferry_subscription_set_add(set, NULL, "Item", "TRUEPREDICATE"), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_subscription_set_add(set, "items", NULL, "TRUEPREDICATE"), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_subscription_set_add(set, "items", "Item", NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_subscription_set_add(set, "items", "", "TRUEPREDICATE"), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_subscription_set_count(&n, set));
  CHECK_EQ_INT(n, 0);
  CHECK_OK(ferry_subscription_set_add(set, "items", "Item", "TRUEPREDICATE"));
  CHECK_OK(ferry_subscription_set_get(NULL, NULL, NULL, set, 0)); /* "Any out may be NULL" */
  CHECK_ERR(ferry_subscription_set_get(&s1, &s2, &s3, set, 1), FERRY_ERR_OUT_OF_RANGE);
  CHECK_ERR(ferry_subscription_set_get(&s1, &s2, &s3, set, SIZE_MAX), FERRY_ERR_OUT_OF_RANGE);
  CHECK_ERR(ferry_subscription_set_remove(&removed, set, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(removed);
  CHECK_OK(ferry_subscription_set_remove(NULL, set, "no such subscription"));
  CHECK_ERR(ferry_subscription_set_remove_type(&n, set, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_subscription_set_remove_type(NULL, set, "NoSuchType"));
  CHECK_OK(ferry_subscription_set_count(&n, set));
  CHECK_EQ_INT(n, 1);
  CHECK_ERR(ferry_sync_update_subscriptions(&version, session, NULL), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_sync_update_subscriptions(&version, session, (ferry_subscription_set_t *)session), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_sync_update_subscriptions(&version, session, (ferry_subscription_set_t *)db), FERRY_ERR_INVALID_HANDLE);
  CHECK_EQ_INT(version, 0);
  /* wrong-kind frees are no-ops */
  ferry_subscription_set_free((ferry_subscription_set_t *)session);
  ferry_sync_session_free((ferry_sync_session_t *)set);
  ferry_sync_session_free((ferry_sync_session_t *)user);
  ferry_user_free((ferry_user_t *)session);
  ferry_app_free((ferry_app_t *)session);
  ferry_app_free((ferry_app_t *)user);
  CHECK_OK(ferry_subscription_set_count(&n, set));
  CHECK_OK(ferry_user_state(&state, user));

  /* barrier: a real completion after every failing call; none of those called back */
  calls = done_calls();
  CHECK_OK(ferry_sync_wait_for_download(session, done_status, NULL));
  CHECK_EQ_INT(done_wait(calls), FERRY_OK);
  CHECK_EQ_INT(__atomic_load_n(&stray_calls, __ATOMIC_SEQ_CST), 0);
  CHECK_EQ_INT(loop_frees_now(), 2); /* the freed tokens' userdata were not freed again */

  /* freed handles: a set, a session (its database handle stays usable), a user, an App */
  ferry_subscription_set_free(set);
  set_fns_fail(set, "a freed subscription set");
  ferry_subscription_set_free(set);
  ferry_subscription_set_t *set2 = NULL;
  CHECK_OK(ferry_sync_subscriptions(&set2, session));
  ferry_sync_session_free(session);
  session_fns_fail(session, set2, "a freed session");
  ferry_sync_session_free(session);
  /* a progress token that outlives its session: freed once */
  ferry_progress_token_free(ptoken_outlives);
  CHECK_EQ_INT(loop_frees_wait(3), 3);
  ferry_progress_token_free(ptoken_outlives);
  set_fns_fail((ferry_subscription_set_t *)session, "a freed session");
  CHECK_OK(ferry_subscription_set_count(&n, set2)); /* a copy: it outlives its session */
  ferry_subscription_set_free(set2);
  CHECK_OK(ferry_db_class_count(&n, sdb));
  ferry_db_free(sdb);
  ferry_user_t *user2 = NULL;
  CHECK_OK(ferry_app_current_user(&user2, live));
  CHECK(user2 != NULL);
  ferry_user_free(user);
  user_fns_fail(user, "a freed user");
  CHECK_ERR(ferry_sync_open(&session, &sdb, user, &so), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_app_log_out(live, user, stray_status, NULL), FERRY_ERR_INVALID_HANDLE);
  ferry_user_free(user);
  before = frees_now();
  ferry_app_free(app);
  CHECK_EQ_INT(frees_now(), before + 1); /* the error handler's userdata */
  app_fns_fail(app, "a freed app");
  ferry_app_free(app);
  ferry_app_free(live);
  app_fns_fail(live, "a freed app");
  /* a connection state token that outlives its session and its App: freed once */
  ferry_connection_state_token_free(ctoken_outlives);
  CHECK_EQ_INT(loop_frees_wait(4), 4);
  ferry_connection_state_token_free(ctoken_outlives);
  CHECK_EQ_INT(loop_frees_now(), 4);
  /* a user that outlives its App: still readable, but it cannot open a synced database */
  CHECK_OK(ferry_user_id(&id, user2));
  session = (ferry_sync_session_t *)&session;
  CHECK_ERR_ANY(ferry_sync_open(&session, &sdb, user2, &so), FERRY_ERR_CLOSED, FERRY_ERR_INVALID_ARGUMENT,
                FERRY_ERR_AUTH);
  CHECK(session == (ferry_sync_session_t *)&session);
  {
    /* the same through ferry_sync_open_async: an error of the call (the header names only
       INVALID_HANDLE and INVALID_ARGUMENT there, ferry_sync_open's errors go to the
       completion), or a completion with an error */
    calls = done_calls();
    int rc = ferry_sync_open_async(user2, &so, done_open, NULL);
    if (rc == FERRY_OK) {
      CHECKF(done_wait(calls) != FERRY_OK, "ferry_sync_open_async with a user of a freed App succeeded");
      CHECK(done.session == NULL && done.db == NULL);
    } else {
      CHECK_LAST_ERROR(rc);
      CHECKF(rc == FERRY_ERR_CLOSED || rc == FERRY_ERR_INVALID_ARGUMENT,
             "ferry_sync_open_async with a user of a freed App returned %d (%s)", rc, ferry_strerror(rc));
      if (rc == FERRY_ERR_CLOSED) printf("test_bad_args: note: ferry_sync_open_async returns FERRY_ERR_CLOSED itself for a user of a freed App\n");
    }
  }
  ferry_user_free(user2);
  CHECK_EQ_INT(__atomic_load_n(&stray_calls, __ATOMIC_SEQ_CST), 0);
  server_stop();
}

/* ---- the main sequence -------------------------------------------------------------------- */

int main(void) {
  CHECK(sizeof all_functions / sizeof all_functions[0] == 108);
  for (size_t i = 0; i < sizeof all_functions / sizeof all_functions[0]; i++) CHECK(all_functions[i] != NULL);
  test_globals();
  test_schemas();

  ferry_schema_t *schema = make_schema();
  ferry_schema_t *freed_schema = make_schema();
  ferry_schema_free(freed_schema);
  test_options(schema, freed_schema);
  ferry_schema_free(freed_schema); /* a second free of a freed handle is harmless */

  /* live handles of every kind */
  /* a copy: test_path's buffers are a small ring, reused by later calls */
  static char path[700];
  snprintf(path, sizeof path, "%s", test_path("bad-args.ferry"));
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_POLL, false));
  ferry_class_key_t cls = CLASS_KEY(db, "Item");
  CHECK_EQ_INT(cls, 0);
  CHECK_EQ_INT(PROP_KEY(db, cls, "_id"), 0);
  CHECK_EQ_INT(PROP_KEY(db, cls, "name"), 1);
  CHECK_EQ_INT(PROP_KEY(db, cls, "n"), 2);
  CHECK_EQ_INT(PROP_KEY(db, cls, "tags"), 3);
  ferry_value_t key = v_int(1), five = v_int(5);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, cls, (ferry_property_value_t[]){pv(0, key), pv(1, v_str("one"))}, 2));
  CHECK_OK(ferry_list_insert(db, cls, &key, 3, 0, &five));
  CHECK_OK(ferry_db_commit(db));
  ferry_results_t *results = NULL;
  CHECK_OK(ferry_db_query(&results, db, cls, "TRUEPREDICATE", NULL, 0));
  ferry_object_t *object = NULL;
  CHECK_OK(ferry_object_get(&object, db, cls, &key));
  ferry_notification_token_t *token = NULL;
  CHECK_OK(ferry_db_observe_query(&token, db, cls, "TRUEPREDICATE", NULL, 0, count_call, NULL, count_free));

  /* NULL out-pointers on a valid handle */
  for (int f = 0; f < F_COUNT; f++) {
    if (!has_out((enum db_fn)f)) continue;
    int rc = call_db((enum db_fn)f, db, true);
    CHECKF(rc == FERRY_ERR_INVALID_ARGUMENT, "%s with a NULL out returned %d (%s)", db_fn_names[f],
           rc, ferry_strerror(rc));
    CHECK_LAST_ERROR(FERRY_ERR_INVALID_ARGUMENT);
  }
  CHECK_OK(ferry_db_deliver_notifications(NULL, db)); /* this out may be NULL */
  {
    /* F-NOLOSS: records and errors are only those Ferry lent or copied; a host-made one is
       refused, never read */
    ferry_sync_error_t fake_error;
    memset(&fake_error, 0, sizeof fake_error);
    ferry_reverted_object_t fake;
    memset(&fake, 0, sizeof fake);
    const ferry_reverted_object_t *lent = NULL;
    ferry_reverted_object_t *copy = NULL;
    CHECK_ERR(ferry_sync_error_reverted_object(NULL, &fake_error, 0), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_sync_error_reverted_object(&lent, NULL, 0), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_sync_error_reverted_object(&lent, &fake_error, 0), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_reverted_object_copy(NULL, &fake), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_reverted_object_copy(&copy, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_reverted_object_copy(&copy, &fake), FERRY_ERR_INVALID_ARGUMENT);
    CHECK(copy == NULL);
    ferry_reverted_object_free(NULL);
    ferry_reverted_object_free(&fake); /* not Ferry's: left alone */
    CHECK_ERR(ferry_db_reapply_reverted(NULL, &fake, NULL, 0), FERRY_ERR_INVALID_HANDLE);
    CHECK_ERR(ferry_db_reapply_reverted(db, NULL, NULL, 0), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_reapply_reverted(db, &fake, NULL, 0), FERRY_ERR_INVALID_ARGUMENT);
  }
  {
    /* ferry_db_write_copy's path: NULL, empty, an existing file, a missing directory; then a
       good copy, which opens with the file's own schema and holds the object */
    CHECK_ERR(ferry_db_write_copy(db, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_write_copy(db, ""), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_write_copy(db, path), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR_ANY(ferry_db_write_copy(db, test_path("no-such-dir/copy.ferry")), FERRY_ERR_IO, FERRY_ERR_INVALID_ARGUMENT);
    char copy_path[700];
    snprintf(copy_path, sizeof copy_path, "%s", test_path("bad-args-copy.ferry"));
    CHECK_OK(ferry_db_write_copy(db, copy_path));
    CHECK_ERR(ferry_db_write_copy(db, copy_path), FERRY_ERR_INVALID_ARGUMENT);
    ferry_db_t *copy = NULL;
    CHECK_OK(db_open_path(&copy, copy_path, NULL, FERRY_DELIVERY_POLL, false));
    ferry_object_t *copied = NULL;
    CHECK_OK(ferry_object_get(&copied, copy, cls, &key));
    CHECK(copied != NULL);
    ferry_object_free(copied);
    ferry_db_free(copy);
  }
  {
    ferry_value_t v;
    const ferry_value_t *items = NULL;
    size_t n = 0;
    ferry_class_key_t c = 0;
    size_t count = 0;
    ferry_object_t *o = NULL;
    CHECK_ERR(ferry_object_get_class(NULL, object), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_get_value(NULL, object, 1), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_get_list(NULL, &n, object, 3), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_get_list(&items, NULL, object, 3), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_results_count(NULL, results), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_results_get(NULL, results, 0), FERRY_ERR_INVALID_ARGUMENT);
    /* and the same objects still work */
    CHECK_OK(ferry_object_get_class(&c, object));
    CHECK_OK(ferry_object_get_value(&v, object, 1));
    CHECK_VALUE(v, v_str("one"));
    CHECK_OK(ferry_object_get_list(&items, &n, object, 3));
    CHECK_EQ_INT(n, 1);
    CHECK_OK(ferry_results_count(&count, results));
    CHECK_EQ_INT(count, 1);
    CHECK_OK(ferry_results_get(&o, results, 0));
    ferry_object_free(o);
  }

  /* NULL and non-out pointer arguments */
  {
    ferry_class_key_t c = 0;
    ferry_property_key_t p = 0;
    ferry_results_t *r = NULL;
    ferry_object_t *o = NULL;
    ferry_value_t v = v_str("x");
    CHECK_ERR(ferry_db_find_class(&c, db, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_find_property(&p, db, cls, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_query(&r, db, cls, NULL, NULL, 0), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_query(&r, db, cls, "n == $0", NULL, 1), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_get(&o, db, cls, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_OK(ferry_db_begin_write(db));
    CHECK_ERR(ferry_object_create(db, cls, NULL, 2), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_create(db, cls, NULL, 0), FERRY_ERR_INVALID_ARGUMENT); /* no key */
    CHECK_ERR(ferry_object_upsert(db, cls, NULL, 2), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_set(db, cls, NULL, 1, &v), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_set(db, cls, &key, 1, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_add_int(db, cls, NULL, 2, 1), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_delete(db, cls, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_list_insert(db, cls, NULL, 3, 0, &five), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_list_insert(db, cls, &key, 3, 0, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_list_set(db, cls, NULL, 3, 0, &five), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_list_set(db, cls, &key, 3, 0, NULL), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_list_erase(db, cls, NULL, 3, 0), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_list_clear(db, cls, NULL, 3), FERRY_ERR_INVALID_ARGUMENT);

    /* unknown class keys */
    const ferry_class_key_t bad_classes[] = {1, 999, UINT32_MAX};
    ferry_property_value_t vals[] = {pv(0, v_int(50))};
    for (size_t i = 0; i < 3; i++) {
      ferry_class_key_t b = bad_classes[i];
      ferry_class_info_t ci;
      ferry_property_info_t pi;
      CHECK_ERR(ferry_db_get_class(&ci, db, b), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_db_find_property(&p, db, b, "name"), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_db_get_property(&pi, db, b, 0), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_object_create(db, b, vals, 1), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_object_upsert(db, b, vals, 1), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_object_set(db, b, &key, 1, &v), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_object_add_int(db, b, &key, 2, 1), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_object_delete(db, b, &key), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_list_insert(db, b, &key, 3, 0, &five), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_list_set(db, b, &key, 3, 0, &five), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_list_erase(db, b, &key, 3, 0), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_list_clear(db, b, &key, 3), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_object_get(&o, db, b, &key), FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_db_query(&r, db, b, "TRUEPREDICATE", NULL, 0), FERRY_ERR_NO_SUCH_CLASS);
      ferry_notification_token_t *t = NULL;
      int before = frees_now();
      CHECK_ERR(ferry_db_observe_query(&t, db, b, "TRUEPREDICATE", NULL, 0, count_call, NULL, count_free),
                FERRY_ERR_NO_SUCH_CLASS);
      CHECK_ERR(ferry_db_observe_object(&t, db, b, &key, count_call, NULL, count_free),
                FERRY_ERR_NO_SUCH_CLASS);
      CHECK_EQ_INT(frees_now(), before + 2);
    }
    /* unknown property keys */
    const ferry_property_key_t bad_props[] = {6, 999, UINT32_MAX};
    for (size_t i = 0; i < 3; i++) {
      ferry_property_key_t b = bad_props[i];
      ferry_property_info_t pi;
      ferry_property_value_t pvals[] = {pv(0, v_int(51)), pv(b, v_int(1))};
      CHECK_ERR(ferry_db_get_property(&pi, db, cls, b), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_object_create(db, cls, pvals, 2), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_object_upsert(db, cls, pvals, 2), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_object_set(db, cls, &key, b, &v), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_object_add_int(db, cls, &key, b, 1), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_list_insert(db, cls, &key, b, 0, &five), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_list_set(db, cls, &key, b, 0, &five), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_list_erase(db, cls, &key, b, 0), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_list_clear(db, cls, &key, b), FERRY_ERR_NO_SUCH_PROPERTY);
      ferry_value_t got;
      const ferry_value_t *items = NULL;
      size_t n = 0;
      CHECK_ERR(ferry_object_get_value(&got, object, b), FERRY_ERR_NO_SUCH_PROPERTY);
      CHECK_ERR(ferry_object_get_list(&items, &n, object, b), FERRY_ERR_NO_SUCH_PROPERTY);
    }
    CHECK_ERR(ferry_db_find_property(&p, db, cls, "nosuch"), FERRY_ERR_NO_SUCH_PROPERTY);
    CHECK_ERR(ferry_db_find_class(&c, db, "Nosuch"), FERRY_ERR_NO_SUCH_CLASS);
    CHECK_ERR(ferry_db_find_class(&c, db, ""), FERRY_ERR_NO_SUCH_CLASS);

    /* bad values: tags outside the enum and FERRY_TYPE_LINK are not values at all, so the
       header allows either a wrong type or an invalid argument */
    const int32_t bad_tags[] = {FERRY_TYPE_LINK, 10, 99, -1, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_tags / sizeof bad_tags[0]; i++) {
      ferry_value_t bv = v_int(1);
      bv.type = bad_tags[i];
      ferry_property_value_t bvals[] = {pv(0, v_int(60)), pv(2, bv)};
      ferry_property_value_t bkey[] = {pv(0, bv)};
      CHECK_ERR_ANY(ferry_object_create(db, cls, bvals, 2), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_create(db, cls, bkey, 1), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_upsert(db, cls, bvals, 2), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_set(db, cls, &key, 2, &bv), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_set(db, cls, &bv, 2, &five), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_add_int(db, cls, &bv, 2, 1), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_delete(db, cls, &bv), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_list_insert(db, cls, &key, 3, 0, &bv), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_list_set(db, cls, &key, 3, 0, &bv), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_ERR_ANY(ferry_object_get(&o, db, cls, &bv), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      /* an argument that is not a value: the query's errors, or those of a bad value */
      CHECK_ERR_ANY(ferry_db_query(&r, db, cls, "n == $0", &bv, 1), FERRY_ERR_QUERY,
                    FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_WRONG_TYPE);
      ferry_notification_token_t *t = NULL;
      int before = frees_now();
      CHECK_ERR_ANY(ferry_db_observe_object(&t, db, cls, &bv, count_call, NULL, count_free),
                    FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
      CHECK_EQ_INT(frees_now(), before + 1);
    }
    /* values of a real type that is wrong for the property */
    ferry_value_t s = v_str("five"), d = v_double(5.0), b = v_bool(true);
    CHECK_ERR(ferry_object_set(db, cls, &key, 2, &s), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_object_set(db, cls, &key, 2, &d), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_object_set(db, cls, &key, 1, &b), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_list_insert(db, cls, &key, 3, 0, &s), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_object_get(&o, db, cls, &s), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_object_delete(db, cls, &s), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_object_add_int(db, cls, &key, 1, 1), FERRY_ERR_WRONG_TYPE);
    /* malformed values of a valid type: NULL data with a size, out-of-range nanoseconds */
    ferry_value_t null_str = v_strn(NULL, 3), null_bin = v_bin(NULL, 3);
    CHECK_ERR(ferry_object_set(db, cls, &key, 1, &null_str), FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_object_set(db, cls, &key, 5, &null_bin), FERRY_ERR_INVALID_ARGUMENT);
    /* a malformed string for an int key: both codes describe it */
    CHECK_ERR_ANY(ferry_object_get(&o, db, cls, &null_str), FERRY_ERR_WRONG_TYPE, FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ferry_db_query(&r, db, cls, "name == $0", &null_str, 1), FERRY_ERR_INVALID_ARGUMENT);
    const int32_t bad_ns[] = {-1, 1000000000, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < 4; i++) {
      ferry_value_t ts = v_ts(0, bad_ns[i]);
      /* "nanoseconds in [0, 999999999]": an out-of-range number */
      CHECK_ERR(ferry_object_set(db, cls, &key, 4, &ts), FERRY_ERR_INVALID_ARGUMENT);
    }
    /* strings that are not UTF-8: refused or stored, never a crash */
    ferry_value_t not_utf8 = v_strn("\xff\xfe\xc3", 3);
    CHECK_ERR_ANY(ferry_object_set(db, cls, &key, 1, &not_utf8), FERRY_OK, FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR_ANY(ferry_db_query(&r, db, cls, "name == $0", &not_utf8, 1), FERRY_OK, FERRY_ERR_INVALID_ARGUMENT);
    if (r) ferry_results_free(r);
    r = NULL;
    CHECK_ERR_ANY(ferry_db_find_class(&c, db, "\xff\xfe"), FERRY_ERR_NO_SUCH_CLASS, FERRY_ERR_INVALID_ARGUMENT);
    CHECK_ERR_ANY(ferry_db_query(&r, db, cls, "name == \"\xff\xfe\"", NULL, 0), FERRY_OK, FERRY_ERR_QUERY,
                  FERRY_ERR_INVALID_ARGUMENT);
    if (r) ferry_results_free(r);
    r = NULL;
    /* indices past the end */
    CHECK_ERR(ferry_list_set(db, cls, &key, 3, 1, &five), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_list_insert(db, cls, &key, 3, SIZE_MAX, &five), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_list_erase(db, cls, &key, 3, SIZE_MAX), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_results_get(&o, results, 1), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_results_get(&o, results, SIZE_MAX), FERRY_ERR_OUT_OF_RANGE);
    CHECK_OK(ferry_db_cancel(db));

    /* bad queries */
    const char *const bad_queries[] = {"", "(", ")", "name ==", "== 1", "name == \"x", "n <= 1 AND",
                                       "$0 == $0", "n == $99999999999999999999", "SORT(n ASC)",
                                       "TRUEPREDICATE LIMIT(x)", "n IN {", "\"unterminated", "\\",
                                       "name BEGINSWITH[x] \"a\"", "n == 99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_queries / sizeof bad_queries[0]; i++) {
      r = (ferry_results_t *)&r;
      int rc = ferry_db_query(&r, db, cls, bad_queries[i], NULL, 0);
      CHECKF(rc == FERRY_ERR_QUERY, "query \"%s\" returned %d (%s)", bad_queries[i], rc, ferry_strerror(rc));
      CHECK_LAST_ERROR(FERRY_ERR_QUERY);
      CHECK(r == (ferry_results_t *)&r);
    }
  }

  /* wrong kinds of handles */
  all_db_fns_fail((ferry_db_t *)results, FERRY_ERR_INVALID_HANDLE, "a results handle");
  all_db_fns_fail((ferry_db_t *)object, FERRY_ERR_INVALID_HANDLE, "an object handle");
  all_db_fns_fail((ferry_db_t *)token, FERRY_ERR_INVALID_HANDLE, "a token handle");
  all_db_fns_fail((ferry_db_t *)schema, FERRY_ERR_INVALID_HANDLE, "a schema handle");
  all_db_fns_fail(NULL, FERRY_ERR_INVALID_HANDLE, "NULL");
  results_fns_fail((ferry_results_t *)db, FERRY_ERR_INVALID_HANDLE, "a db handle");
  results_fns_fail((ferry_results_t *)object, FERRY_ERR_INVALID_HANDLE, "an object handle");
  results_fns_fail((ferry_results_t *)token, FERRY_ERR_INVALID_HANDLE, "a token handle");
  results_fns_fail((ferry_results_t *)schema, FERRY_ERR_INVALID_HANDLE, "a schema handle");
  results_fns_fail(NULL, FERRY_ERR_INVALID_HANDLE, "NULL");
  object_fns_fail((ferry_object_t *)db, FERRY_ERR_INVALID_HANDLE, "a db handle");
  object_fns_fail((ferry_object_t *)results, FERRY_ERR_INVALID_HANDLE, "a results handle");
  object_fns_fail((ferry_object_t *)token, FERRY_ERR_INVALID_HANDLE, "a token handle");
  object_fns_fail((ferry_object_t *)schema, FERRY_ERR_INVALID_HANDLE, "a schema handle");
  object_fns_fail(NULL, FERRY_ERR_INVALID_HANDLE, "NULL");
  {
    ferry_db_options_t o;
    ferry_db_t *d = NULL;
    CHECK_OK(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION));
    o.path = path;
    o.schema = (const ferry_schema_t *)db;
    CHECK_ERR(ferry_db_open(&d, &o), FERRY_ERR_INVALID_HANDLE);
    o.schema = (const ferry_schema_t *)results;
    CHECK_ERR(ferry_db_open(&d, &o), FERRY_ERR_INVALID_HANDLE);
    CHECK(d == NULL);
  }
  test_sync_bad_args(db, schema, results, object, token);

  /* free functions given the wrong kind do nothing: every handle still works afterwards */
  ferry_db_free((ferry_db_t *)results);
  ferry_db_free((ferry_db_t *)token);
  ferry_results_free((ferry_results_t *)db);
  ferry_results_free((ferry_results_t *)object);
  ferry_object_free((ferry_object_t *)results);
  ferry_object_free((ferry_object_t *)schema);
  ferry_schema_free((ferry_schema_t *)object);
  ferry_schema_free((ferry_schema_t *)db);
  int frees_before = frees_now();
  ferry_notification_token_free((ferry_notification_token_t *)results);
  ferry_notification_token_free((ferry_notification_token_t *)db);
  CHECK_EQ_INT(frees_now(), frees_before);
  {
    size_t n = 0;
    ferry_class_key_t c = 99;
    bool closed = true;
    CHECK_OK(ferry_results_count(&n, results));
    CHECK_EQ_INT(n, 1);
    CHECK_OK(ferry_object_get_class(&c, object));
    CHECK_EQ_INT(c, cls);
    CHECK_OK(ferry_db_is_closed(&closed, db));
    CHECK(!closed);
    ferry_db_t *d = NULL;
    CHECK_OK(db_open_path(&d, test_path("schema-still-alive.ferry"), schema, FERRY_DELIVERY_LOOP, false));
    ferry_db_free(d);
  }

  /* freed handles: free one of each kind, then use it (no new handle of the same kind is
     made in between, so the address cannot have been reused for one) */
  {
    ferry_results_t *fr = NULL;
    ferry_object_t *fo = NULL;
    ferry_notification_token_t *ft = NULL;
    CHECK_OK(ferry_db_query(&fr, db, cls, "TRUEPREDICATE", NULL, 0));
    CHECK_OK(ferry_object_get(&fo, db, cls, &key));
    int before = frees_now();
    CHECK_OK(ferry_db_observe_object(&ft, db, cls, &key, count_call, NULL, count_free));
    ferry_results_free(fr);
    ferry_object_free(fo);
    ferry_notification_token_free(ft);
    CHECK_EQ_INT(frees_now(), before + 1);
    results_fns_fail(fr, FERRY_ERR_INVALID_HANDLE, "a freed results handle");
    object_fns_fail(fo, FERRY_ERR_INVALID_HANDLE, "a freed object handle");
    /* freeing them again is harmless, and userdata_free does not run twice */
    ferry_results_free(fr);
    ferry_object_free(fo);
    ferry_notification_token_free(ft);
    CHECK_EQ_INT(frees_now(), before + 1);
  }

  /* a closed database (a POLL one, so that deliver and the fd are meaningful) */
  ferry_db_t *closed_db = NULL;
  CHECK_OK(db_open_path(&closed_db, path, NULL, FERRY_DELIVERY_POLL, false));
  ferry_results_t *before_close = NULL;
  ferry_object_t *object_before_close = NULL;
  CHECK_OK(ferry_db_query(&before_close, closed_db, cls, "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_object_get(&object_before_close, closed_db, cls, &key));
  CHECK_OK(ferry_db_close(closed_db));
  all_db_fns_fail(closed_db, FERRY_ERR_CLOSED, "a closed database");
  {
    /* snapshots taken before the close: still readable, or CLOSED; never a crash */
    size_t n = 0;
    ferry_value_t v;
    CHECK_ERR_ANY(ferry_results_count(&n, before_close), FERRY_OK, FERRY_ERR_CLOSED);
    CHECK_ERR_ANY(ferry_object_get_value(&v, object_before_close, 1), FERRY_OK, FERRY_ERR_CLOSED);
    ferry_results_free(before_close);
    ferry_object_free(object_before_close);
    /* the other handle on the same file is unaffected */
    CHECK_OK(ferry_db_class_count(&n, db));
  }

  /* a freed database */
  ferry_db_t *freed_db = NULL;
  CHECK_OK(db_open_mem(&freed_db, "bad-args-freed", schema, FERRY_DELIVERY_LOOP));
  ferry_db_free(freed_db);
  all_db_fns_fail(freed_db, FERRY_ERR_INVALID_HANDLE, "a freed database");
  ferry_db_free(freed_db); /* freeing again is harmless */
  ferry_db_free(closed_db);
  all_db_fns_fail(closed_db, FERRY_ERR_INVALID_HANDLE, "a closed then freed database");

  /* a token that outlives its freed database can still be freed, exactly once */
  frees_before = frees_now();
  ferry_results_free(results);
  ferry_object_free(object);
  ferry_db_free(db);
  CHECK_EQ_INT(frees_now(), frees_before);
  ferry_notification_token_free(token);
  CHECK_EQ_INT(frees_now(), frees_before + 1);
  ferry_notification_token_free(token);
  CHECK_EQ_INT(frees_now(), frees_before + 1);
  CHECK_EQ_INT(__atomic_load_n(&calls, __ATOMIC_SEQ_CST), 0);

  /* the schema handle, freed */
  ferry_schema_free(schema);
  {
    ferry_db_options_t o;
    ferry_db_t *d = NULL;
    CHECK_OK(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION));
    o.path = test_path("freed-schema.ferry");
    o.schema = schema;
    CHECK_ERR(ferry_db_open(&d, &o), FERRY_ERR_INVALID_HANDLE);
  }
  ferry_schema_free(schema);
  return check_done("test_bad_args");
}
