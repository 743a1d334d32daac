/*
 * test_database.c — schema, opening (file and in-memory), write transactions, object writes
 * and reads, lists, links, every value type round-tripping, threads, and schema migration.
 */
#include "check.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

/* ---- the schema: every property type, required, optional and as a list ------------------- */

#define SCALAR_TYPES 8
static const int32_t scalar_types[SCALAR_TYPES] = {
    FERRY_TYPE_BOOL,   FERRY_TYPE_INT,       FERRY_TYPE_DOUBLE,    FERRY_TYPE_STRING,
    FERRY_TYPE_BINARY, FERRY_TYPE_TIMESTAMP, FERRY_TYPE_OBJECT_ID, FERRY_TYPE_UUID};
/* required: b i d s bin ts oid uuid; optional: o_<name>; list: l_<name> */
static const char *const scalar_names[SCALAR_TYPES] = {"b", "i", "d", "s", "bin", "ts", "oid", "uuid"};
static const char *const optional_names[SCALAR_TYPES] = {"o_b",   "o_i",  "o_d",   "o_s",
                                                         "o_bin", "o_ts", "o_oid", "o_uuid"};
static const char *const list_names[SCALAR_TYPES] = {"l_b",   "l_i",  "l_d",   "l_s",
                                                     "l_bin", "l_ts", "l_oid", "l_uuid"};

static ferry_schema_t *make_everything_schema(void) {
  ferry_property_info_t props[1 + 3 * SCALAR_TYPES + 2];
  size_t n = 0;
  props[n++] = (ferry_property_info_t){"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL};
  for (int t = 0; t < SCALAR_TYPES; t++) {
    /* the required string and the optional int are indexed */
    uint32_t idx = scalar_types[t] == FERRY_TYPE_STRING ? FERRY_PROPERTY_INDEXED : 0;
    props[n++] = (ferry_property_info_t){scalar_names[t], scalar_types[t], idx, NULL};
  }
  for (int t = 0; t < SCALAR_TYPES; t++) {
    uint32_t idx = scalar_types[t] == FERRY_TYPE_INT ? FERRY_PROPERTY_INDEXED : 0;
    props[n++] = (ferry_property_info_t){optional_names[t], scalar_types[t],
                                         FERRY_PROPERTY_OPTIONAL | idx, NULL};
  }
  for (int t = 0; t < SCALAR_TYPES; t++)
    props[n++] = (ferry_property_info_t){list_names[t], scalar_types[t], FERRY_PROPERTY_LIST, NULL};
  props[n++] = (ferry_property_info_t){"owner", FERRY_TYPE_LINK, FERRY_PROPERTY_OPTIONAL, "Person"};
  props[n++] = (ferry_property_info_t){"friends", FERRY_TYPE_LINK, FERRY_PROPERTY_LIST, "Person"};

  static const ferry_property_info_t person_props[] = {
      {"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"name", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"age", FERRY_TYPE_INT, FERRY_PROPERTY_OPTIONAL, NULL},
  };
  static const ferry_property_info_t counter_props[] = {
      {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"value", FERRY_TYPE_INT, FERRY_PROPERTY_NORMAL, NULL},
  };
  static const ferry_property_info_t tagged_props[] = {
      {"_id", FERRY_TYPE_UUID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
  };
  ferry_class_info_t classes[] = {
      {"Everything", props, n, FERRY_CLASS_NORMAL},
      {"Person", person_props, 3, FERRY_CLASS_NORMAL},
      {"Counter", counter_props, 2, FERRY_CLASS_NORMAL},
      {"Log", tagged_props, 2, FERRY_CLASS_ASYMMETRIC},
  };
  ferry_schema_t *schema = NULL;
  CHECK_OK(ferry_schema_new(&schema, classes, 4));
  CHECK(schema != NULL);
  return schema;
}

/* ---- samples of every type ---------------------------------------------------------------- */

static const char utf8_text[] = "h\xc3\xa9llo \xe2\x80\x94 \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x9a\x80";
static const char embedded_nul[] = {'a', '\0', 'b'};
static const char not_terminated[] = {'a', 'b', 'c', 'd', 'X'}; /* only "abcd" is passed */
static const uint8_t some_bytes[] = {0x00, 0xff, 0x10, 0x00, 0x80};
static uint8_t big_bytes[100000];
static char big_string[20001];
static const uint8_t oid_ff[12] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t uuid_a[16] = {0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3,
                                   0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00};
static const uint8_t uuid_ff[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t zeros[16] = {0};

#define MAX_SAMPLES 8
static size_t samples_of(int32_t type, ferry_value_t out[MAX_SAMPLES]) {
  size_t n = 0;
  switch (type) {
    case FERRY_TYPE_BOOL:
      out[n++] = v_bool(true);
      out[n++] = v_bool(false);
      break;
    case FERRY_TYPE_INT:
      out[n++] = v_int(42);
      out[n++] = v_int(-1);
      out[n++] = v_int(INT64_MIN);
      out[n++] = v_int(INT64_MAX);
      out[n++] = v_int(0);
      break;
    case FERRY_TYPE_DOUBLE:
      out[n++] = v_double(1.5);
      out[n++] = v_double(-1e308);
      out[n++] = v_double(DBL_MIN / 4); /* subnormal */
      out[n++] = v_double(INFINITY);
      out[n++] = v_double(-INFINITY);
      out[n++] = v_double(0.1);
      out[n++] = v_double(0.0);
      break;
    case FERRY_TYPE_STRING:
      out[n++] = v_str(utf8_text);
      out[n++] = v_str("");
      out[n++] = v_strn(not_terminated, 4);
      out[n++] = v_strn(embedded_nul, sizeof embedded_nul);
      out[n++] = v_str(big_string);
      out[n++] = v_str("'; DROP TABLE Everything; --\"");
      break;
    case FERRY_TYPE_BINARY:
      out[n++] = v_bin(some_bytes, sizeof some_bytes);
      out[n++] = v_bin(NULL, 0);
      out[n++] = v_bin(some_bytes, 0);
      out[n++] = v_bin(big_bytes, sizeof big_bytes);
      break;
    case FERRY_TYPE_TIMESTAMP:
      out[n++] = v_ts(1700000000, 123456789);
      out[n++] = v_ts(-1, 500000000);    /* half a second before the epoch */
      out[n++] = v_ts(-86400 * 365, 0);  /* 1969 */
      out[n++] = v_ts(-62135596800, 0);  /* 0001-01-01 */
      out[n++] = v_ts(253402300799, 999999999); /* 9999-12-31T23:59:59.999999999 */
      out[n++] = v_ts(0, 0);
      break;
    case FERRY_TYPE_OBJECT_ID: {
      ferry_value_t g;
      CHECK_OK(ferry_object_id_generate(&g));
      out[n++] = g;
      out[n++] = v_oid_bytes(oid_ff);
      out[n++] = v_oid_bytes(zeros);
      break;
    }
    case FERRY_TYPE_UUID:
      out[n++] = v_uuid_bytes(uuid_a);
      out[n++] = v_uuid_bytes(uuid_ff);
      out[n++] = v_uuid_bytes(zeros);
      break;
    default: CHECK(!"unknown type");
  }
  return n;
}

/* The zero value a required property gets when left out. */
static ferry_value_t zero_of(int32_t type) {
  switch (type) {
    case FERRY_TYPE_BOOL: return v_bool(false);
    case FERRY_TYPE_INT: return v_int(0);
    case FERRY_TYPE_DOUBLE: return v_double(0.0);
    case FERRY_TYPE_STRING: return v_str("");
    case FERRY_TYPE_BINARY: return v_bin(NULL, 0);
    case FERRY_TYPE_TIMESTAMP: return v_ts(0, 0);
    case FERRY_TYPE_OBJECT_ID: return v_oid_bytes(zeros);
    case FERRY_TYPE_UUID: return v_uuid_bytes(zeros);
    default: return v_null();
  }
}

/* ---- version and ObjectIds -------------------------------------------------------------- */

static void test_version_and_object_ids(void) {
  CHECK_STREQ(ferry_version(), FERRY_VERSION_STRING);
  CHECK_EQ_INT(ferry_version_number(),
               FERRY_VERSION_MAJOR * 10000 + FERRY_VERSION_MINOR * 100 + FERRY_VERSION_PATCH);

  ferry_value_t a, b;
  time_t before = time(NULL);
  CHECK_OK(ferry_object_id_generate(&a));
  CHECK_OK(ferry_object_id_generate(&b));
  time_t after = time(NULL);
  CHECK_EQ_INT(a.type, FERRY_TYPE_OBJECT_ID);
  CHECK_EQ_INT(b.type, FERRY_TYPE_OBJECT_ID);
  CHECK(memcmp(a.u.object_id, b.u.object_id, 12) != 0);
  uint32_t secs = (uint32_t)a.u.object_id[0] << 24 | (uint32_t)a.u.object_id[1] << 16 |
                  (uint32_t)a.u.object_id[2] << 8 | a.u.object_id[3];
  CHECKF(secs >= (uint32_t)before - 1 && secs <= (uint32_t)after + 1,
         "ObjectId seconds %u not in [%ld, %ld]", secs, (long)before, (long)after);
  /* Seconds, a 3-byte counter within the second, 40 random bits (issue 23): ids made in one
     process are strictly increasing, so the second one is greater; in the same second its
     counter is the next. Its 40 random bits are fresh: nothing fixed per process (MongoDB's
     bytes 4..9), no counter at the end (its bytes 9..12), so one id does not predict the next.
     The last two checks fail by chance with probability 2^-40 and 2^-24. */
  CHECK(memcmp(a.u.object_id, b.u.object_id, 12) < 0);
  if (memcmp(a.u.object_id, b.u.object_id, 4) == 0) {
    uint32_t na = (uint32_t)a.u.object_id[4] << 16 | (uint32_t)a.u.object_id[5] << 8 | a.u.object_id[6];
    uint32_t nb = (uint32_t)b.u.object_id[4] << 16 | (uint32_t)b.u.object_id[5] << 8 | b.u.object_id[6];
    CHECKF(nb == na + 1, "counters %u then %u in the same second", na, nb);
  }
  CHECK(memcmp(a.u.object_id + 7, b.u.object_id + 7, 5) != 0);
  uint32_t ca = (uint32_t)a.u.object_id[9] << 16 | (uint32_t)a.u.object_id[10] << 8 | a.u.object_id[11];
  uint32_t cb = (uint32_t)b.u.object_id[9] << 16 | (uint32_t)b.u.object_id[10] << 8 | b.u.object_id[11];
  CHECK(cb != ((ca + 1) & 0xffffff));
}

/* ---- schema introspection ----------------------------------------------------------------- */

static void test_schema_introspection(ferry_db_t *db) {
  size_t count = 0;
  CHECK_OK(ferry_db_class_count(&count, db));
  CHECK_EQ_INT(count, 4);

  ferry_class_key_t ev = CLASS_KEY(db, "Everything");
  ferry_class_key_t person = CLASS_KEY(db, "Person");
  ferry_class_key_t log = CLASS_KEY(db, "Log");
  CHECK(ev < count && person < count && ev != person);

  ferry_class_info_t info;
  CHECK_OK(ferry_db_get_class(&info, db, ev));
  CHECK_STREQ(info.name, "Everything");
  CHECK_EQ_INT(info.property_count, 1 + 3 * SCALAR_TYPES + 2);
  CHECK(info.properties == NULL);
  CHECK_EQ_INT(info.flags, FERRY_CLASS_NORMAL);
  CHECK_OK(ferry_db_get_class(&info, db, log));
  CHECK_STREQ(info.name, "Log");
  CHECK_EQ_INT(info.flags, FERRY_CLASS_ASYMMETRIC);

  ferry_class_key_t k = 99;
  CHECK_ERR(ferry_db_find_class(&k, db, "Nope"), FERRY_ERR_NO_SUCH_CLASS);
  CHECK_EQ_INT(k, 99); /* out-parameters are left untouched on failure */
  CHECK_ERR(ferry_db_find_class(&k, db, "everything"), FERRY_ERR_NO_SUCH_CLASS); /* case matters */

  ferry_property_info_t pinfo;
  ferry_property_key_t id = PROP_KEY(db, ev, "_id");
  CHECK_OK(ferry_db_get_property(&pinfo, db, ev, id));
  CHECK_STREQ(pinfo.name, "_id");
  CHECK_EQ_INT(pinfo.type, FERRY_TYPE_OBJECT_ID);
  CHECK_EQ_INT(pinfo.flags, FERRY_PROPERTY_PRIMARY_KEY);
  CHECK(pinfo.link_target == NULL);

  for (int t = 0; t < SCALAR_TYPES; t++) {
    ferry_property_key_t p = PROP_KEY(db, ev, scalar_names[t]);
    CHECK_OK(ferry_db_get_property(&pinfo, db, ev, p));
    CHECK_STREQ(pinfo.name, scalar_names[t]);
    CHECK_EQ_INT(pinfo.type, scalar_types[t]);
    CHECK_EQ_INT(pinfo.flags, scalar_types[t] == FERRY_TYPE_STRING ? FERRY_PROPERTY_INDEXED : 0);
    p = PROP_KEY(db, ev, optional_names[t]);
    CHECK_OK(ferry_db_get_property(&pinfo, db, ev, p));
    CHECK_EQ_INT(pinfo.type, scalar_types[t]);
    CHECK_EQ_INT(pinfo.flags, FERRY_PROPERTY_OPTIONAL | (scalar_types[t] == FERRY_TYPE_INT
                                                             ? FERRY_PROPERTY_INDEXED
                                                             : 0));
    p = PROP_KEY(db, ev, list_names[t]);
    CHECK_OK(ferry_db_get_property(&pinfo, db, ev, p));
    CHECK_EQ_INT(pinfo.type, scalar_types[t]);
    CHECK_EQ_INT(pinfo.flags, FERRY_PROPERTY_LIST);
  }
  ferry_property_key_t owner = PROP_KEY(db, ev, "owner");
  CHECK_OK(ferry_db_get_property(&pinfo, db, ev, owner));
  CHECK_EQ_INT(pinfo.type, FERRY_TYPE_LINK);
  CHECK_STREQ(pinfo.link_target, "Person");
  CHECK_EQ_INT(pinfo.flags, FERRY_PROPERTY_OPTIONAL);
  ferry_property_key_t friends = PROP_KEY(db, ev, "friends");
  CHECK_OK(ferry_db_get_property(&pinfo, db, ev, friends));
  CHECK_EQ_INT(pinfo.type, FERRY_TYPE_LINK);
  CHECK_STREQ(pinfo.link_target, "Person");
  CHECK_EQ_INT(pinfo.flags, FERRY_PROPERTY_LIST);

  ferry_property_key_t pk = 77;
  CHECK_ERR(ferry_db_find_property(&pk, db, ev, "nope"), FERRY_ERR_NO_SUCH_PROPERTY);
  CHECK_EQ_INT(pk, 77);
  CHECK_ERR(ferry_db_find_property(&pk, db, 1000, "_id"), FERRY_ERR_NO_SUCH_CLASS);
  CHECK_ERR(ferry_db_get_property(&pinfo, db, ev, 1000), FERRY_ERR_NO_SUCH_PROPERTY);
  CHECK_ERR(ferry_db_get_class(&info, db, 1000), FERRY_ERR_NO_SUCH_CLASS);
}

/* ---- transactions ------------------------------------------------------------------------- */

static void test_transactions(ferry_db_t *db, ferry_db_t *other) {
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  ferry_property_key_t id = PROP_KEY(db, c, "_id");
  ferry_property_key_t value = PROP_KEY(db, c, "value");
  bool in_tx = true;
  uint64_t h0 = 0, h = 0;
  CHECK_OK(ferry_db_history_count(&h0, db));

  CHECK_OK(ferry_db_is_in_transaction(&in_tx, db));
  CHECK(!in_tx);

  /* writes outside a transaction */
  ferry_property_value_t vals[] = {pv(id, v_int(1)), pv(value, v_int(10))};
  ferry_value_t key1 = v_int(1), key2 = v_int(2), ten = v_int(10);
  CHECK_ERR(ferry_object_create(db, c, vals, 2), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_object_upsert(db, c, vals, 2), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_object_set(db, c, &key1, value, &ten), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_object_add_int(db, c, &key1, value, 1), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_object_delete(db, c, &key1), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_db_commit(db), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_db_cancel(db), FERRY_ERR_NOT_IN_TRANSACTION);

  /* commit */
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_db_is_in_transaction(&in_tx, db));
  CHECK(in_tx);
  CHECK_ERR(ferry_db_begin_write(db), FERRY_ERR_ALREADY_IN_TRANSACTION);
  /* another handle on this thread: waiting would deadlock */
  CHECK_ERR(ferry_db_begin_write(other), FERRY_ERR_ALREADY_IN_TRANSACTION);
  CHECK_OK(ferry_object_create(db, c, vals, 2));
  /* our own uncommitted write is visible through this handle, not through the other one */
  CHECK_STORED(db, c, key1, value, v_int(10));
  ferry_object_t *o = (ferry_object_t *)&o;
  CHECK_ERR(ferry_object_get(&o, other, c, &key1), FERRY_ERR_NOT_FOUND);
  CHECK(o == NULL);
  CHECK_OK(ferry_db_commit(db));
  CHECK_OK(ferry_db_is_in_transaction(&in_tx, db));
  CHECK(!in_tx);
  CHECK_STORED(other, c, key1, value, v_int(10));
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, h0 + 1);

  /* cancel */
  CHECK_OK(ferry_db_begin_write(db));
  ferry_property_value_t vals2[] = {pv(id, v_int(2)), pv(value, v_int(20))};
  CHECK_OK(ferry_object_create(db, c, vals2, 2));
  CHECK_OK(ferry_object_set(db, c, &key1, value, &(ferry_value_t){.type = FERRY_TYPE_INT, .u.i = 11}));
  CHECK_STORED(db, c, key2, value, v_int(20));
  CHECK_OK(ferry_db_cancel(db));
  CHECK_ERR(ferry_object_get(&o, db, c, &key2), FERRY_ERR_NOT_FOUND);
  CHECK_STORED(db, c, key1, value, v_int(10));
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, h0 + 1);

  /* a transaction with no changes writes no changeset */
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_db_commit(db));
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, h0 + 1);

  /* a transaction belongs to the handle: the other handle can write after we finish */
  CHECK_OK(ferry_db_begin_write(other));
  CHECK_ERR(ferry_db_begin_write(db), FERRY_ERR_ALREADY_IN_TRANSACTION);
  CHECK_OK(ferry_object_add_int(other, c, &key1, value, 5));
  CHECK_OK(ferry_db_commit(other));
  CHECK_STORED(db, c, key1, value, v_int(15));
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, h0 + 2);
  CHECK_OK(ferry_db_verify_history(db));
}

/* A transaction begun on one thread may be committed from another. */
static void *commit_from_thread(void *arg) {
  ferry_db_t *db = arg;
  intptr_t rc = ferry_db_commit(db);
  return (void *)rc;
}

static void test_commit_on_other_thread(ferry_db_t *db) {
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  ferry_property_key_t id = PROP_KEY(db, c, "_id");
  CHECK_OK(ferry_db_begin_write(db));
  ferry_property_value_t vals[] = {pv(id, v_int(3))};
  CHECK_OK(ferry_object_create(db, c, vals, 1));
  pthread_t t;
  void *ret = NULL;
  CHECK(pthread_create(&t, NULL, commit_from_thread, db) == 0);
  CHECK(pthread_join(t, &ret) == 0);
  CHECK_EQ_INT((intptr_t)ret, FERRY_OK);
  bool in_tx = true;
  CHECK_OK(ferry_db_is_in_transaction(&in_tx, db));
  CHECK(!in_tx);
  CHECK_STORED(db, c, v_int(3), PROP_KEY(db, c, "value"), v_int(0));
}

/* ---- creating, upserting, setting, adding, deleting -------------------------------------- */

static void test_object_writes(ferry_db_t *db) {
  ferry_class_key_t ev = CLASS_KEY(db, "Everything");
  ferry_class_key_t person = CLASS_KEY(db, "Person");
  ferry_property_key_t id = PROP_KEY(db, ev, "_id");
  ferry_property_key_t pid = PROP_KEY(db, person, "_id");
  ferry_property_key_t pname = PROP_KEY(db, person, "name");
  ferry_property_key_t page = PROP_KEY(db, person, "age");
  ferry_value_t k = v_oid_n(1);

  CHECK_OK(ferry_db_begin_write(db));
  /* defaults: required -> zero value, optional -> null, lists empty */
  ferry_property_value_t only_id[] = {pv(id, k)};
  CHECK_OK(ferry_object_create(db, ev, only_id, 1));
  CHECK_ERR(ferry_object_create(db, ev, only_id, 1), FERRY_ERR_DUPLICATE_PRIMARY_KEY);

  ferry_object_t *o = NULL;
  CHECK_OK(ferry_object_get(&o, db, ev, &k));
  ferry_class_key_t oc = 1234;
  CHECK_OK(ferry_object_get_class(&oc, o));
  CHECK_EQ_INT(oc, ev);
  ferry_value_t got;
  CHECK_OK(ferry_object_get_value(&got, o, id));
  CHECK_VALUE(got, k);
  for (int t = 0; t < SCALAR_TYPES; t++) {
    CHECK_OK(ferry_object_get_value(&got, o, PROP_KEY(db, ev, scalar_names[t])));
    CHECK_VALUE(got, zero_of(scalar_types[t]));
    CHECK_OK(ferry_object_get_value(&got, o, PROP_KEY(db, ev, optional_names[t])));
    CHECK_VALUE(got, v_null());
    const ferry_value_t *items = (const ferry_value_t *)&got;
    size_t n = 99;
    CHECK_OK(ferry_object_get_list(&items, &n, o, PROP_KEY(db, ev, list_names[t])));
    CHECK_EQ_INT(n, 0);
    CHECK(items == NULL); /* "NULL when empty" */
    CHECK_ERR(ferry_object_get_value(&got, o, PROP_KEY(db, ev, list_names[t])), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_object_get_list(&items, &n, o, PROP_KEY(db, ev, scalar_names[t])),
              FERRY_ERR_WRONG_TYPE);
  }
  CHECK_OK(ferry_object_get_value(&got, o, PROP_KEY(db, ev, "owner")));
  CHECK_VALUE(got, v_null());
  CHECK_ERR(ferry_object_get_value(&got, o, 1000), FERRY_ERR_NO_SUCH_PROPERTY);
  ferry_object_free(o);

  /* create errors */
  ferry_property_value_t no_pk[] = {pv(PROP_KEY(db, ev, "i"), v_int(1))};
  CHECK_ERR(ferry_object_create(db, ev, no_pk, 1), FERRY_ERR_INVALID_ARGUMENT);
  ferry_property_value_t twice[] = {pv(id, v_oid_n(2)), pv(PROP_KEY(db, ev, "i"), v_int(1)),
                                    pv(PROP_KEY(db, ev, "i"), v_int(2))};
  CHECK_ERR(ferry_object_create(db, ev, twice, 3), FERRY_ERR_INVALID_ARGUMENT);
  ferry_property_value_t with_list[] = {pv(id, v_oid_n(2)), pv(PROP_KEY(db, ev, "l_i"), v_int(1))};
  CHECK_ERR(ferry_object_create(db, ev, with_list, 2), FERRY_ERR_INVALID_ARGUMENT);
  ferry_property_value_t wrong[] = {pv(id, v_oid_n(2)), pv(PROP_KEY(db, ev, "i"), v_str("1"))};
  CHECK_ERR(ferry_object_create(db, ev, wrong, 2), FERRY_ERR_WRONG_TYPE);
  ferry_property_value_t null_req[] = {pv(id, v_oid_n(2)), pv(PROP_KEY(db, ev, "s"), v_null())};
  CHECK_ERR(ferry_object_create(db, ev, null_req, 2), FERRY_ERR_WRONG_TYPE);
  ferry_property_value_t wrong_pk[] = {pv(id, v_int(2))};
  CHECK_ERR(ferry_object_create(db, ev, wrong_pk, 1), FERRY_ERR_WRONG_TYPE);
  ferry_property_value_t unknown[] = {pv(id, v_oid_n(2)), pv(999, v_int(1))};
  CHECK_ERR(ferry_object_create(db, ev, unknown, 2), FERRY_ERR_NO_SUCH_PROPERTY);
  CHECK_ERR(ferry_object_create(db, 999, only_id, 1), FERRY_ERR_NO_SUCH_CLASS);
  /* none of the failed creates left anything behind */
  ferry_value_t k2 = v_oid_n(2);
  CHECK_ERR(ferry_object_get(&o, db, ev, &k2), FERRY_ERR_NOT_FOUND);

  /* upsert: creates, then updates only the given properties */
  ferry_value_t alice = v_str("alice");
  ferry_property_value_t up1[] = {pv(pid, alice), pv(pname, v_str("Alice")), pv(page, v_int(30))};
  CHECK_OK(ferry_object_upsert(db, person, up1, 3));
  ferry_property_value_t up2[] = {pv(pid, alice), pv(pname, v_str("Alice B."))};
  CHECK_OK(ferry_object_upsert(db, person, up2, 2));
  CHECK_STORED(db, person, alice, pname, v_str("Alice B."));
  CHECK_STORED(db, person, alice, page, v_int(30));
  ferry_property_value_t up3[] = {pv(pid, alice), pv(page, v_null())};
  CHECK_OK(ferry_object_upsert(db, person, up3, 2));
  CHECK_STORED(db, person, alice, page, v_null());
  CHECK_ERR(ferry_object_upsert(db, person, (ferry_property_value_t[]){pv(pid, alice), pv(page, v_str("x"))}, 2),
            FERRY_ERR_WRONG_TYPE);

  /* set */
  ferry_value_t bob = v_str("bob");
  ferry_value_t val = v_str("Bobby");
  CHECK_ERR(ferry_object_set(db, person, &bob, pname, &val), FERRY_ERR_NOT_FOUND);
  CHECK_OK(ferry_object_set(db, person, &alice, pname, &val));
  CHECK_STORED(db, person, alice, pname, val);
  ferry_value_t n = v_null();
  CHECK_ERR(ferry_object_set(db, person, &alice, pname, &n), FERRY_ERR_WRONG_TYPE);
  ferry_value_t i5 = v_int(5);
  CHECK_ERR(ferry_object_set(db, person, &alice, pname, &i5), FERRY_ERR_WRONG_TYPE);
  CHECK_OK(ferry_object_set(db, person, &alice, page, &i5));
  CHECK_OK(ferry_object_set(db, person, &alice, page, &n));
  CHECK_STORED(db, person, alice, page, v_null());
  ferry_value_t other_name = v_str("carol");
  /* the primary key cannot be set */
  CHECK_ERR(ferry_object_set(db, person, &alice, pid, &other_name), FERRY_ERR_INVALID_ARGUMENT);
  /* a list cannot be set: the header lists INVALID_ARGUMENT for set; list operations use
     WRONG_TYPE for the opposite mistake, so either is accepted here */
  ferry_value_t one = v_int(1);
  CHECK_ERR2(ferry_object_set(db, ev, &k, PROP_KEY(db, ev, "l_i"), &one), FERRY_ERR_INVALID_ARGUMENT,
             FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_object_set(db, person, &alice, 999, &one), FERRY_ERR_NO_SUCH_PROPERTY);
  CHECK_ERR(ferry_object_set(db, 999, &alice, 0, &one), FERRY_ERR_NO_SUCH_CLASS);
  CHECK_ERR(ferry_object_set(db, person, &one, pname, &val), FERRY_ERR_WRONG_TYPE); /* key type */

  /* add_int */
  ferry_property_key_t ri = PROP_KEY(db, ev, "i"), oi = PROP_KEY(db, ev, "o_i");
  CHECK_OK(ferry_object_add_int(db, ev, &k, ri, 5));
  CHECK_OK(ferry_object_add_int(db, ev, &k, ri, -7));
  CHECK_STORED(db, ev, k, ri, v_int(-2));
  CHECK_OK(ferry_object_add_int(db, ev, &k, oi, 3)); /* null counts as 0 */
  CHECK_STORED(db, ev, k, oi, v_int(3));
  ferry_value_t big = v_int(INT64_MAX - 1);
  CHECK_OK(ferry_object_set(db, ev, &k, ri, &big));
  CHECK_OK(ferry_object_add_int(db, ev, &k, ri, 1));
  CHECK_ERR(ferry_object_add_int(db, ev, &k, ri, 1), FERRY_ERR_OUT_OF_RANGE);
  CHECK_STORED(db, ev, k, ri, v_int(INT64_MAX));
  ferry_value_t small = v_int(INT64_MIN);
  CHECK_OK(ferry_object_set(db, ev, &k, ri, &small));
  CHECK_ERR(ferry_object_add_int(db, ev, &k, ri, -1), FERRY_ERR_OUT_OF_RANGE);
  CHECK_STORED(db, ev, k, ri, v_int(INT64_MIN));
  CHECK_ERR(ferry_object_add_int(db, ev, &k, PROP_KEY(db, ev, "d"), 1), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_object_add_int(db, ev, &k, PROP_KEY(db, ev, "s"), 1), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_object_add_int(db, ev, &k2, ri, 1), FERRY_ERR_NOT_FOUND);

  /* delete */
  ferry_property_value_t tmp[] = {pv(id, v_oid_n(3))};
  ferry_value_t k3 = v_oid_n(3);
  CHECK_OK(ferry_object_create(db, ev, tmp, 1));
  CHECK_OK(ferry_object_delete(db, ev, &k3));
  CHECK_ERR(ferry_object_get(&o, db, ev, &k3), FERRY_ERR_NOT_FOUND);
  CHECK_ERR(ferry_object_delete(db, ev, &k3), FERRY_ERR_NOT_FOUND);
  CHECK_ERR(ferry_object_delete(db, ev, &one), FERRY_ERR_WRONG_TYPE);
  /* a deleted primary key can be used again */
  CHECK_OK(ferry_object_create(db, ev, tmp, 1));
  CHECK_OK(ferry_object_delete(db, ev, &k3));
  CHECK_OK(ferry_db_commit(db));

  /* an object snapshot keeps its values after the object changes or goes away */
  CHECK_OK(ferry_object_get(&o, db, person, &alice));
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_delete(db, person, &alice));
  CHECK_OK(ferry_db_commit(db));
  CHECK_OK(ferry_object_get_value(&got, o, pname));
  CHECK_VALUE(got, val);
  ferry_object_free(o);
  CHECK_OK(ferry_db_verify_history(db));
}

/* ---- every value type round-tripping -------------------------------------------------- */

static void test_round_trip(ferry_db_t *db) {
  ferry_class_key_t ev = CLASS_KEY(db, "Everything");
  ferry_property_key_t id = PROP_KEY(db, ev, "_id");
  uint32_t next_id = 100;

  for (int t = 0; t < SCALAR_TYPES; t++) {
    ferry_property_key_t req = PROP_KEY(db, ev, scalar_names[t]);
    ferry_property_key_t opt = PROP_KEY(db, ev, optional_names[t]);
    ferry_value_t samples[MAX_SAMPLES];
    size_t ns = samples_of(scalar_types[t], samples);
    for (size_t s = 0; s < ns; s++) {
      /* through create */
      ferry_value_t key = v_oid_n(next_id++);
      ferry_property_value_t vals[] = {pv(id, key), pv(req, samples[s]), pv(opt, samples[s])};
      CHECK_OK(ferry_db_begin_write(db));
      CHECK_OK(ferry_object_create(db, ev, vals, 3));
      CHECK_OK(ferry_db_commit(db));
      CHECK_STORED(db, ev, key, req, samples[s]);
      CHECK_STORED(db, ev, key, opt, samples[s]);
      /* through set, over a different value, and null for the optional */
      ferry_value_t other = samples[(s + 1) % ns];
      ferry_value_t null = v_null();
      CHECK_OK(ferry_db_begin_write(db));
      CHECK_OK(ferry_object_set(db, ev, &key, req, &other));
      CHECK_OK(ferry_object_set(db, ev, &key, opt, &null));
      CHECK_OK(ferry_db_commit(db));
      CHECK_STORED(db, ev, key, req, other);
      CHECK_STORED(db, ev, key, opt, v_null());
      CHECK_OK(ferry_db_begin_write(db));
      CHECK_OK(ferry_object_set(db, ev, &key, req, &samples[s]));
      CHECK_OK(ferry_object_set(db, ev, &key, opt, &samples[s]));
      CHECK_OK(ferry_db_commit(db));
      CHECK_STORED(db, ev, key, req, samples[s]);
      CHECK_STORED(db, ev, key, opt, samples[s]);
    }
  }
  /* NaN is a double too */
  ferry_value_t key = v_oid_n(next_id++);
  ferry_property_key_t d = PROP_KEY(db, ev, "d");
  ferry_property_value_t vals[] = {pv(id, key), pv(d, v_double(NAN))};
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, ev, vals, 2));
  CHECK_OK(ferry_db_commit(db));
  ferry_object_t *o = NULL;
  ferry_value_t got;
  CHECK_OK(ferry_object_get(&o, db, ev, &key));
  CHECK_OK(ferry_object_get_value(&got, o, d));
  CHECKF(got.type == FERRY_TYPE_DOUBLE && isnan(got.u.d), "NaN read back as %s", value_str(&got));
  ferry_object_free(o);

  /* -0.0 keeps its sign */
  key = v_oid_n(next_id++);
  ferry_property_value_t negz[] = {pv(id, key), pv(d, v_double(-0.0))};
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, ev, negz, 2));
  CHECK_OK(ferry_db_commit(db));
  CHECK_STORED(db, ev, key, d, v_double(-0.0));
  CHECK_OK(ferry_db_verify_history(db));
}

/* ---- lists ---------------------------------------------------------------------------- */

static void check_list(ferry_db_t *db, ferry_class_key_t cls, ferry_value_t key,
                       ferry_property_key_t prop, const ferry_value_t *expected, size_t n,
                       int line) {
  ferry_object_t *o = NULL;
  CHECK_OK(ferry_object_get(&o, db, cls, &key));
  const ferry_value_t *items = NULL;
  size_t count = 12345;
  CHECK_OK(ferry_object_get_list(&items, &count, o, prop));
  CHECKF(count == n, "line %d: list has %zu elements, expected %zu", line, count, n);
  if (n == 0) CHECKF(items == NULL, "line %d: an empty list gives NULL", line);
  for (size_t i = 0; i < n; i++)
    CHECKF(value_equal(&items[i], &expected[i]), "line %d: element %zu is %s, expected %s", line,
           i, value_str(&items[i]), value_str(&expected[i]));
  ferry_object_free(o);
}
#define CHECK_LIST(db, cls, key, prop, expected, n) \
  check_list(db, cls, key, prop, expected, n, __LINE__)

static void test_lists(ferry_db_t *db) {
  ferry_class_key_t ev = CLASS_KEY(db, "Everything");
  ferry_property_key_t id = PROP_KEY(db, ev, "_id");
  ferry_value_t key = v_oid_n(5000);
  ferry_property_value_t vals[] = {pv(id, key)};
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, ev, vals, 1));
  CHECK_OK(ferry_db_commit(db));

  for (int t = 0; t < SCALAR_TYPES; t++) {
    ferry_property_key_t lp = PROP_KEY(db, ev, list_names[t]);
    ferry_value_t samples[MAX_SAMPLES];
    size_t ns = samples_of(scalar_types[t], samples);
    CHECK(ns >= 2);
    ferry_value_t expect[MAX_SAMPLES + 2];
    CHECK_OK(ferry_db_begin_write(db));
    /* append every sample in order */
    for (size_t s = 0; s < ns; s++) {
      CHECK_OK(ferry_list_insert(db, ev, &key, lp, s, &samples[s]));
      expect[s] = samples[s];
    }
    CHECK_OK(ferry_db_commit(db));
    CHECK_LIST(db, ev, key, lp, expect, ns);

    CHECK_OK(ferry_db_begin_write(db));
    /* insert at the front, set, erase in the middle */
    CHECK_OK(ferry_list_insert(db, ev, &key, lp, 0, &samples[1]));
    memmove(expect + 1, expect, ns * sizeof expect[0]);
    expect[0] = samples[1];
    size_t len = ns + 1;
    CHECK_OK(ferry_list_set(db, ev, &key, lp, len - 1, &samples[0]));
    expect[len - 1] = samples[0];
    CHECK_OK(ferry_list_erase(db, ev, &key, lp, 1));
    memmove(expect + 1, expect + 2, (len - 2) * sizeof expect[0]);
    len--;
    /* errors */
    CHECK_ERR(ferry_list_insert(db, ev, &key, lp, len + 1, &samples[0]), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_list_set(db, ev, &key, lp, len, &samples[0]), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_list_erase(db, ev, &key, lp, len), FERRY_ERR_OUT_OF_RANGE);
    CHECK_ERR(ferry_list_erase(db, ev, &key, lp, SIZE_MAX), FERRY_ERR_OUT_OF_RANGE);
    ferry_value_t wrong = scalar_types[t] == FERRY_TYPE_STRING ? v_int(1) : v_str("x");
    CHECK_ERR(ferry_list_insert(db, ev, &key, lp, 0, &wrong), FERRY_ERR_WRONG_TYPE);
    CHECK_ERR(ferry_list_set(db, ev, &key, lp, 0, &wrong), FERRY_ERR_WRONG_TYPE);
    ferry_value_t null = v_null();
    CHECK_ERR(ferry_list_insert(db, ev, &key, lp, 0, &null), FERRY_ERR_WRONG_TYPE);
    CHECK_OK(ferry_db_commit(db));
    CHECK_LIST(db, ev, key, lp, expect, len);

    /* clear */
    CHECK_OK(ferry_db_begin_write(db));
    CHECK_OK(ferry_list_clear(db, ev, &key, lp));
    CHECK_OK(ferry_list_clear(db, ev, &key, lp));
    CHECK_OK(ferry_db_commit(db));
    CHECK_LIST(db, ev, key, lp, expect, 0);
  }

  /* list operations on a property that is not a list, a missing object, outside a write */
  ferry_value_t one = v_int(1);
  ferry_property_key_t ri = PROP_KEY(db, ev, "i"), li = PROP_KEY(db, ev, "l_i");
  ferry_value_t missing = v_oid_n(5001);
  CHECK_ERR(ferry_list_insert(db, ev, &key, li, 0, &one), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_ERR(ferry_list_clear(db, ev, &key, li), FERRY_ERR_NOT_IN_TRANSACTION);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_ERR(ferry_list_insert(db, ev, &key, ri, 0, &one), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_list_set(db, ev, &key, ri, 0, &one), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_list_erase(db, ev, &key, ri, 0), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_list_clear(db, ev, &key, ri), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_list_insert(db, ev, &missing, li, 0, &one), FERRY_ERR_NOT_FOUND);
  CHECK_ERR(ferry_list_clear(db, ev, &missing, li), FERRY_ERR_NOT_FOUND);
  /* a long list survives a cancel unchanged */
  for (int i = 0; i < 1000; i++) CHECK_OK(ferry_list_insert(db, ev, &key, li, (size_t)i, &(ferry_value_t){.type = FERRY_TYPE_INT, .u.i = i}));
  CHECK_OK(ferry_db_commit(db));
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_list_clear(db, ev, &key, li));
  CHECK_OK(ferry_db_cancel(db));
  {
    ferry_object_t *o = NULL;
    CHECK_OK(ferry_object_get(&o, db, ev, &key));
    const ferry_value_t *items = NULL;
    size_t count = 0;
    CHECK_OK(ferry_object_get_list(&items, &count, o, li));
    CHECK_EQ_INT(count, 1000);
    for (size_t i = 0; i < count; i++) CHECK_VALUE(items[i], v_int((int64_t)i));
    ferry_object_free(o);
  }
  CHECK_OK(ferry_db_verify_history(db));
}

/* ---- links -------------------------------------------------------------------------------- */

static void test_links(ferry_db_t *db) {
  ferry_class_key_t ev = CLASS_KEY(db, "Everything");
  ferry_class_key_t person = CLASS_KEY(db, "Person");
  ferry_property_key_t id = PROP_KEY(db, ev, "_id");
  ferry_property_key_t owner = PROP_KEY(db, ev, "owner");
  ferry_property_key_t friends = PROP_KEY(db, ev, "friends");
  ferry_property_key_t pid = PROP_KEY(db, person, "_id");
  ferry_value_t dave = v_str("dave"), erin = v_str("erin");
  ferry_value_t key = v_oid_n(6000);

  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, person, (ferry_property_value_t[]){pv(pid, dave)}, 1));
  CHECK_OK(ferry_object_create(db, person, (ferry_property_value_t[]){pv(pid, erin)}, 1));
  ferry_property_value_t vals[] = {pv(id, key), pv(owner, dave)};
  CHECK_OK(ferry_object_create(db, ev, vals, 2));
  CHECK_OK(ferry_list_insert(db, ev, &key, friends, 0, &dave));
  CHECK_OK(ferry_list_insert(db, ev, &key, friends, 1, &erin));
  /* a link is written as the target's primary key: a key of another type is wrong */
  ferry_value_t seven = v_int(7);
  CHECK_ERR(ferry_object_set(db, ev, &key, owner, &seven), FERRY_ERR_WRONG_TYPE);
  CHECK_ERR(ferry_list_insert(db, ev, &key, friends, 0, &seven), FERRY_ERR_WRONG_TYPE);
  CHECK_OK(ferry_db_commit(db));
  CHECK_STORED(db, ev, key, owner, dave);
  ferry_value_t both[] = {dave, erin};
  CHECK_LIST(db, ev, key, friends, both, 2);

  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_set(db, ev, &key, owner, &erin));
  ferry_value_t null = v_null();
  CHECK_OK(ferry_db_commit(db));
  CHECK_STORED(db, ev, key, owner, erin);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_set(db, ev, &key, owner, &null));
  CHECK_OK(ferry_db_commit(db));
  CHECK_STORED(db, ev, key, owner, v_null());
  CHECK_OK(ferry_db_verify_history(db));
}

/* ---- in-memory databases ---------------------------------------------------------------- */

static void test_in_memory(const ferry_schema_t *schema) {
  ferry_db_t *a = NULL, *b = NULL;
  CHECK_OK(db_open_mem(&a, "test-database-mem", schema, FERRY_DELIVERY_LOOP));
  CHECK_OK(db_open_mem(&b, "test-database-mem", NULL, FERRY_DELIVERY_LOOP)); /* shares a's */
  ferry_class_key_t c = CLASS_KEY(a, "Counter");
  ferry_property_key_t id = PROP_KEY(a, c, "_id"), value = PROP_KEY(a, c, "value");
  CHECK_OK(ferry_db_begin_write(a));
  CHECK_OK(ferry_object_create(a, c, (ferry_property_value_t[]){pv(id, v_int(1)), pv(value, v_int(9))}, 2));
  CHECK_OK(ferry_db_commit(a));
  CHECK_STORED(b, CLASS_KEY(b, "Counter"), v_int(1), PROP_KEY(b, c, "value"), v_int(9));
  uint64_t h = 0;
  CHECK_OK(ferry_db_history_count(&h, b));
  CHECK_EQ_INT(h, 1);
  CHECK_OK(ferry_db_verify_history(b));

  /* a different identifier is a different database */
  ferry_db_t *other = NULL;
  CHECK_OK(db_open_mem(&other, "test-database-mem-2", schema, FERRY_DELIVERY_LOOP));
  ferry_object_t *o = NULL;
  ferry_value_t k1 = v_int(1);
  CHECK_ERR(ferry_object_get(&o, other, c, &k1), FERRY_ERR_NOT_FOUND);
  ferry_db_free(other);

  /* still alive while one handle is open */
  CHECK_OK(ferry_db_close(a));
  ferry_db_free(a);
  CHECK_STORED(b, c, v_int(1), value, v_int(9));
  ferry_db_free(b);

  /* dropped with the last handle: no schema stored any more, and a fresh open is empty */
  CHECK_ERR(db_open_mem(&a, "test-database-mem", NULL, FERRY_DELIVERY_LOOP), FERRY_ERR_INVALID_SCHEMA);
  CHECK_OK(db_open_mem(&a, "test-database-mem", schema, FERRY_DELIVERY_LOOP));
  CHECK_ERR(ferry_object_get(&o, a, c, &k1), FERRY_ERR_NOT_FOUND);
  ferry_db_free(a);

  /* nothing touched the disk: no file named like the identifier in the working directory */
  struct stat st;
  CHECK(stat("test-database-mem", &st) != 0);

  /* synced in-memory databases are not allowed */
  ferry_db_options_t opts;
  CHECK_OK(ferry_db_options_init(&opts, FERRY_DB_OPTIONS_VERSION));
  opts.in_memory_identifier = "test-database-mem-synced";
  opts.schema = schema;
  opts.synced = true;
  ferry_db_t *bad = NULL;
  CHECK_ERR(ferry_db_open(&bad, &opts), FERRY_ERR_INVALID_ARGUMENT);
  CHECK(bad == NULL);
}

/* ---- opening files ------------------------------------------------------------------------ */

static void test_open_errors(const ferry_schema_t *schema) {
  ferry_db_t *db = NULL;
  /* a new file needs a schema */
  CHECK_ERR(db_open_path(&db, test_path("no-schema.ferry"), NULL, FERRY_DELIVERY_LOOP, false),
            FERRY_ERR_INVALID_SCHEMA);
  CHECK(db == NULL);
  /* the directory must exist */
  CHECK_ERR(db_open_path(&db, test_path("missing-dir/x.ferry"), schema, FERRY_DELIVERY_LOOP, false),
            FERRY_ERR_IO);
  /* not a Ferry database: garbage, and a valid SQLite file of someone else's */
  const char *garbage = test_path("garbage.ferry");
  FILE *f = fopen(garbage, "wb");
  CHECK(f != NULL);
  for (int i = 0; i < 8192; i++) fputc((i * 7919) & 0xff, f);
  fclose(f);
  CHECK_ERR(db_open_path(&db, garbage, schema, FERRY_DELIVERY_LOOP, false), FERRY_ERR_CORRUPT);
  CHECK_ERR(db_open_path(&db, garbage, NULL, FERRY_DELIVERY_LOOP, false), FERRY_ERR_CORRUPT);
  /* an empty file: an empty SQLite database, so it is a new database */
  const char *empty = test_path("empty.ferry");
  f = fopen(empty, "wb");
  CHECK(f != NULL);
  fclose(f);
  CHECK_OK(db_open_path(&db, empty, schema, FERRY_DELIVERY_LOOP, false));
  ferry_db_free(db);
  db = NULL;
  /* a directory is not a database */
  CHECK_ERR2(db_open_path(&db, test_tmpdir(), schema, FERRY_DELIVERY_LOOP, false), FERRY_ERR_IO,
             FERRY_ERR_CORRUPT);
  CHECK(db == NULL);
}

/* ---- threads: one handle per thread, writes serialised -------------------------------------- */

struct thread_arg {
  const char *path;
  int id;
  int rc;
};

#define THREADS 4
#define TX_PER_THREAD 50

static void *thread_writer(void *p) {
  struct thread_arg *arg = p;
  ferry_db_t *db = NULL;
  arg->rc = db_open_path(&db, arg->path, NULL, FERRY_DELIVERY_LOOP, false);
  if (arg->rc != FERRY_OK) return NULL;
  ferry_class_key_t c = 0;
  ferry_property_key_t value = 0;
  ferry_db_find_class(&c, db, "Counter");
  ferry_db_find_property(&value, db, c, "value");
  ferry_value_t key = v_int(42);
  for (int i = 0; i < TX_PER_THREAD && arg->rc == FERRY_OK; i++) {
    if ((arg->rc = ferry_db_begin_write(db)) != FERRY_OK) break;
    if ((arg->rc = ferry_object_add_int(db, c, &key, value, 1)) != FERRY_OK) break;
    arg->rc = ferry_db_commit(db);
    /* and a read in between */
    ferry_object_t *o = NULL;
    if (arg->rc == FERRY_OK && (arg->rc = ferry_object_get(&o, db, c, &key)) == FERRY_OK)
      ferry_object_free(o);
  }
  ferry_db_free(db);
  return NULL;
}

/* Several threads sharing one handle: calls are serialised, each thread writes in turn. */
struct shared_arg {
  ferry_db_t *db;
  int rc;
};

static void *thread_shared_reader(void *p) {
  struct shared_arg *arg = p;
  ferry_class_key_t c = 0;
  arg->rc = ferry_db_find_class(&c, arg->db, "Counter");
  ferry_value_t key = v_int(42);
  for (int i = 0; i < 200 && arg->rc == FERRY_OK; i++) {
    ferry_object_t *o = NULL;
    arg->rc = ferry_object_get(&o, arg->db, c, &key);
    ferry_object_free(o);
    ferry_results_t *r = NULL;
    if (arg->rc == FERRY_OK) arg->rc = ferry_db_query(&r, arg->db, c, "value > 0", NULL, 0);
    ferry_results_free(r);
  }
  return NULL;
}

static void test_threads(const ferry_schema_t *schema) {
  const char *path = test_path("threads.ferry");
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_LOOP, false));
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  ferry_property_key_t id = PROP_KEY(db, c, "_id"), value = PROP_KEY(db, c, "value");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, c, (ferry_property_value_t[]){pv(id, v_int(42))}, 1));
  CHECK_OK(ferry_db_commit(db));

  pthread_t threads[THREADS];
  struct thread_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (struct thread_arg){path, i, -999};
    CHECK(pthread_create(&threads[i], NULL, thread_writer, &args[i]) == 0);
  }
  struct shared_arg sargs[2] = {{db, -999}, {db, -999}};
  pthread_t readers[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&readers[i], NULL, thread_shared_reader, &sargs[i]) == 0);
  for (int i = 0; i < THREADS; i++) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    CHECKF(args[i].rc == FERRY_OK, "writer thread %d failed with %d (%s)", i, args[i].rc,
           ferry_strerror(args[i].rc));
  }
  for (int i = 0; i < 2; i++) {
    CHECK(pthread_join(readers[i], NULL) == 0);
    CHECKF(sargs[i].rc == FERRY_OK, "reader thread %d failed with %d", i, sargs[i].rc);
  }
  CHECK_STORED(db, c, v_int(42), value, v_int(THREADS * TX_PER_THREAD));
  uint64_t h = 0;
  CHECK_OK(ferry_db_history_count(&h, db));
  CHECK_EQ_INT(h, 1 + THREADS * TX_PER_THREAD);
  CHECK_OK(ferry_db_verify_history(db));
  ferry_db_free(db);
}

/* ---- migration ---------------------------------------------------------------------------- */

/* v1: Item {_id string, name string, count int, note string?, extra double?} */
static ferry_schema_t *schema_item(const ferry_property_info_t *props, size_t n,
                                   const ferry_class_info_t *more) {
  ferry_class_info_t classes[2] = {{"Item", props, n, 0}, {0}};
  size_t count = 1;
  if (more) classes[count++] = *more;
  ferry_schema_t *s = NULL;
  CHECK_OK(ferry_schema_new(&s, classes, count));
  return s;
}

static void check_item_v1_data(ferry_db_t *db) {
  ferry_class_key_t item = CLASS_KEY(db, "Item");
  ferry_value_t k = v_str("one");
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "name"), v_str("first"));
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "count"), v_int(7));
  ferry_results_t *r = NULL;
  size_t n = 0;
  CHECK_OK(ferry_db_query(&r, db, item, "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&n, r));
  CHECK_EQ_INT(n, 2);
  ferry_results_free(r);
}

static void test_migration(void) {
  const char *path = test_path("migrate.ferry");
  static const ferry_property_info_t v1[] = {
      {"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"name", FERRY_TYPE_STRING, 0, NULL},
      {"count", FERRY_TYPE_INT, 0, NULL},
      {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL},
  };
  ferry_schema_t *s1 = schema_item(v1, 5, NULL);
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, path, s1, FERRY_DELIVERY_LOOP, false));
  ferry_class_key_t item = CLASS_KEY(db, "Item");
  ferry_property_key_t id = PROP_KEY(db, item, "_id"), name = PROP_KEY(db, item, "name"),
                       count = PROP_KEY(db, item, "count"), note = PROP_KEY(db, item, "note"),
                       extra = PROP_KEY(db, item, "extra");
  CHECK_OK(ferry_db_begin_write(db));
  ferry_property_value_t o1[] = {pv(id, v_str("one")), pv(name, v_str("first")), pv(count, v_int(7)),
                                 pv(note, v_str("n")), pv(extra, v_double(2.5))};
  ferry_property_value_t o2[] = {pv(id, v_str("two")), pv(name, v_str("second")), pv(count, v_int(8))};
  CHECK_OK(ferry_object_create(db, item, o1, 5));
  CHECK_OK(ferry_object_create(db, item, o2, 3));
  CHECK_OK(ferry_db_commit(db));
  CHECK_OK(ferry_db_close(db));
  ferry_db_free(db);

  /* reopen with the stored schema */
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, false));
  check_item_v1_data(db);
  ferry_db_free(db);

  /* breaking changes: each refused, the file unchanged */
  struct {
    const char *what;
    ferry_property_info_t props[5];
    size_t n;
  } breaking[] = {
      {"changed type",
       {{"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL}, {"name", FERRY_TYPE_STRING, 0, NULL},
        {"count", FERRY_TYPE_DOUBLE, 0, NULL}, {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
        {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL}}, 5},
      {"required made optional",
       {{"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL}, {"name", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
        {"count", FERRY_TYPE_INT, 0, NULL}, {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
        {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL}}, 5},
      {"optional made required",
       {{"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL}, {"name", FERRY_TYPE_STRING, 0, NULL},
        {"count", FERRY_TYPE_INT, 0, NULL}, {"note", FERRY_TYPE_STRING, 0, NULL},
        {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL}}, 5},
      {"dropped required property",
       {{"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL}, {"name", FERRY_TYPE_STRING, 0, NULL},
        {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
        {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL}}, 4},
      {"changed primary key type",
       {{"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL}, {"name", FERRY_TYPE_STRING, 0, NULL},
        {"count", FERRY_TYPE_INT, 0, NULL}, {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
        {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL}}, 5},
      {"property made a list",
       {{"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL}, {"name", FERRY_TYPE_STRING, 0, NULL},
        {"count", FERRY_TYPE_INT, FERRY_PROPERTY_LIST, NULL}, {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
        {"extra", FERRY_TYPE_DOUBLE, FERRY_PROPERTY_OPTIONAL, NULL}}, 5},
  };
  for (size_t b = 0; b < sizeof breaking / sizeof breaking[0]; b++) {
    ferry_schema_t *sb = schema_item(breaking[b].props, breaking[b].n, NULL);
    ferry_db_t *bad = NULL;
    int rc = db_open_path(&bad, path, sb, FERRY_DELIVERY_LOOP, false);
    CHECKF(rc == FERRY_ERR_SCHEMA_MISMATCH, "%s: open returned %d (%s)", breaking[b].what, rc,
           ferry_strerror(rc));
    CHECK_LAST_ERROR(FERRY_ERR_SCHEMA_MISMATCH);
    CHECK(bad == NULL);
    ferry_schema_free(sb);
    /* the data is still there, under the old schema */
    CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, false));
    check_item_v1_data(db);
    ferry_db_free(db);
  }

  /* a breaking change while another handle has the file open is refused the same way */
  CHECK_OK(db_open_path(&db, path, s1, FERRY_DELIVERY_LOOP, false));
  {
    ferry_schema_t *sb = schema_item(breaking[0].props, breaking[0].n, NULL);
    ferry_db_t *bad = NULL;
    CHECK_ERR(db_open_path(&bad, path, sb, FERRY_DELIVERY_LOOP, false), FERRY_ERR_SCHEMA_MISMATCH);
    ferry_schema_free(sb);
  }
  ferry_db_free(db);

  /* additive: a new class, new required and optional properties, a new index, a dropped
     optional property (extra) */
  static const ferry_property_info_t v2[] = {
      {"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"name", FERRY_TYPE_STRING, FERRY_PROPERTY_INDEXED, NULL},
      {"count", FERRY_TYPE_INT, 0, NULL},
      {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"score", FERRY_TYPE_DOUBLE, 0, NULL},
      {"when", FERRY_TYPE_TIMESTAMP, 0, NULL},
      {"tag", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"tags", FERRY_TYPE_STRING, FERRY_PROPERTY_LIST, NULL},
      {"buddy", FERRY_TYPE_LINK, FERRY_PROPERTY_OPTIONAL, "Tag"},
  };
  static const ferry_property_info_t tag_props[] = {
      {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
  };
  ferry_class_info_t tag = {"Tag", tag_props, 1, 0};
  ferry_schema_t *s2 = schema_item(v2, 9, &tag);
  CHECK_OK(db_open_path(&db, path, s2, FERRY_DELIVERY_LOOP, false));
  check_item_v1_data(db);
  item = CLASS_KEY(db, "Item");
  ferry_value_t k = v_str("one");
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "note"), v_str("n"));
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "score"), v_double(0.0));
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "when"), v_ts(0, 0));
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "tag"), v_null());
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "buddy"), v_null());
  ferry_property_key_t dropped = 0;
  CHECK_ERR(ferry_db_find_property(&dropped, db, item, "extra"), FERRY_ERR_NO_SUCH_PROPERTY);
  ferry_property_info_t pinfo;
  CHECK_OK(ferry_db_get_property(&pinfo, db, item, PROP_KEY(db, item, "name")));
  CHECK_EQ_INT(pinfo.flags, FERRY_PROPERTY_INDEXED);
  ferry_class_key_t tagc = CLASS_KEY(db, "Tag");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, tagc, (ferry_property_value_t[]){pv(PROP_KEY(db, tagc, "_id"), v_int(1))}, 1));
  ferry_value_t score = v_double(9.5);
  CHECK_OK(ferry_object_set(db, item, &k, PROP_KEY(db, item, "score"), &score));
  CHECK_OK(ferry_db_commit(db));
  /* the index is used by queries and gives the same answers */
  ferry_results_t *r = NULL;
  size_t n = 0;
  CHECK_OK(ferry_db_query(&r, db, item, "name == \"second\"", NULL, 0));
  CHECK_OK(ferry_results_count(&n, r));
  CHECK_EQ_INT(n, 1);
  ferry_results_free(r);
  CHECK_OK(ferry_db_verify_history(db));
  ferry_db_free(db);

  /* reopening with the stored (migrated) schema keeps the new shape; v1 now drops the new
     required properties, which is breaking */
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, false));
  item = CLASS_KEY(db, "Item");
  CHECK_STORED(db, item, k, PROP_KEY(db, item, "score"), v_double(9.5));
  size_t classes = 0;
  CHECK_OK(ferry_db_class_count(&classes, db));
  CHECK_EQ_INT(classes, 2);
  ferry_db_free(db);
  ferry_db_t *bad = NULL;
  CHECK_ERR(db_open_path(&bad, path, s1, FERRY_DELIVERY_LOOP, false), FERRY_ERR_SCHEMA_MISMATCH);

  /* dropping the index again migrates too */
  static const ferry_property_info_t v3[] = {
      {"_id", FERRY_TYPE_STRING, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"name", FERRY_TYPE_STRING, 0, NULL},
      {"count", FERRY_TYPE_INT, 0, NULL},
      {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"score", FERRY_TYPE_DOUBLE, 0, NULL},
      {"when", FERRY_TYPE_TIMESTAMP, 0, NULL},
      {"tag", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"tags", FERRY_TYPE_STRING, FERRY_PROPERTY_LIST, NULL},
      {"buddy", FERRY_TYPE_LINK, FERRY_PROPERTY_OPTIONAL, "Tag"},
  };
  ferry_schema_t *s3 = schema_item(v3, 9, &tag);
  CHECK_OK(db_open_path(&db, path, s3, FERRY_DELIVERY_LOOP, false));
  item = CLASS_KEY(db, "Item");
  CHECK_OK(ferry_db_get_property(&pinfo, db, item, PROP_KEY(db, item, "name")));
  CHECK_EQ_INT(pinfo.flags, 0);
  check_item_v1_data(db);
  CHECK_OK(ferry_db_verify_history(db));
  ferry_db_free(db);

  ferry_schema_free(s1);
  ferry_schema_free(s2);
  ferry_schema_free(s3);
}

/* ---- a schema outlives nothing: databases keep their own copy ------------------------------ */

static void test_schema_copy(void) {
  ferry_schema_t *s = make_everything_schema();
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, test_path("copy.ferry"), s, FERRY_DELIVERY_LOOP, false));
  ferry_schema_free(s);
  ferry_class_key_t p = CLASS_KEY(db, "Person");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, p, (ferry_property_value_t[]){pv(PROP_KEY(db, p, "_id"), v_str("x"))}, 1));
  CHECK_OK(ferry_db_commit(db));
  ferry_db_free(db);
}

int main(void) {
  memset(big_bytes, 0xab, sizeof big_bytes);
  for (size_t i = 0; i < sizeof big_string - 1; i++) big_string[i] = (char)('a' + i % 26);
  big_string[sizeof big_string - 1] = '\0';

  test_version_and_object_ids();

  ferry_schema_t *schema = make_everything_schema();
  const char *path = test_path("database.ferry");
  ferry_db_t *db = NULL, *other = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_LOOP, false));
  CHECK(db != NULL);
  CHECK_OK(db_open_path(&other, path, schema, FERRY_DELIVERY_LOOP, false));
  bool closed = true;
  CHECK_OK(ferry_db_is_closed(&closed, db));
  CHECK(!closed);

  test_schema_introspection(db);
  test_transactions(db, other);
  test_commit_on_other_thread(db);
  test_object_writes(db);
  test_round_trip(db);
  test_lists(db);
  test_links(db);

  /* the same checks through an in-memory database */
  test_in_memory(schema);
  {
    ferry_db_t *mem = NULL, *mem2 = NULL;
    CHECK_OK(db_open_mem(&mem, "test-database-all", schema, FERRY_DELIVERY_LOOP));
    CHECK_OK(db_open_mem(&mem2, "test-database-all", schema, FERRY_DELIVERY_LOOP));
    test_schema_introspection(mem);
    test_transactions(mem, mem2);
    test_object_writes(mem);
    test_round_trip(mem);
    test_lists(mem);
    test_links(mem);
    ferry_db_free(mem2);
    ferry_db_free(mem);
  }

  /* close: a write transaction is cancelled */
  ferry_class_key_t c = CLASS_KEY(db, "Counter");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, c, (ferry_property_value_t[]){pv(PROP_KEY(db, c, "_id"), v_int(777))}, 1));
  CHECK_OK(ferry_db_close(db));
  CHECK_OK(ferry_db_close(db)); /* twice is allowed */
  CHECK_OK(ferry_db_is_closed(&closed, db));
  CHECK(closed);
  ferry_db_free(db);
  ferry_object_t *o = NULL;
  ferry_value_t k777 = v_int(777);
  CHECK_ERR(ferry_object_get(&o, other, c, &k777), FERRY_ERR_NOT_FOUND);
  /* and the other handle can write at once */
  CHECK_OK(ferry_db_begin_write(other));
  CHECK_OK(ferry_db_cancel(other));
  CHECK_OK(ferry_db_verify_history(other));
  ferry_db_free(other);

  /* reopen: everything is still there */
  CHECK_OK(db_open_path(&db, path, NULL, FERRY_DELIVERY_LOOP, false));
  ferry_class_key_t ev = CLASS_KEY(db, "Everything");
  CHECK_STORED(db, ev, v_oid_n(6000), PROP_KEY(db, ev, "owner"), v_null());
  CHECK_STORED(db, ev, v_oid_n(100), PROP_KEY(db, ev, "b"), v_bool(true));
  CHECK_OK(ferry_db_verify_history(db));
  ferry_db_free(db);

  test_open_errors(schema);
  test_threads(schema);
  test_migration();
  test_schema_copy();
  ferry_schema_free(schema);
  return check_done("test_database");
}
