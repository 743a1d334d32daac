/*
 * test_query.c — the query language: every operator, [c], IN, nil, $n arguments, lists,
 * SORT and LIMIT, the same answers with and without an index, snapshots, and bad queries
 * (FERRY_ERR_QUERY with the byte offset in the message).
 *
 * Each query's expected result is computed in C from the same rows, so the expectations are
 * the predicates themselves rather than hand-counted numbers.
 */
#include "check.h"

#include <ctype.h>

#define ROWS 10

static const char *const names[ROWS] = {"Apple", "apricot", "Banana",     "blueberry", "Cherry",
                                        "cherry pie", "Date", "Elderberry", "fig",    "Grape"};

struct row {
  int n;
  char owner[16];
  const char *name;
  int64_t complexity;
  double price;
  bool done;
  int64_t created_s;
  int32_t created_ns;
  bool has_note;
  char note[16];
  bool has_rating;
  int64_t rating;
  int tag_count;
  const char *tags[5];
  uint8_t code[16];
};
static struct row rows[ROWS];

static void make_rows(void) {
  static const char *const tag_pool[] = {"t0", "t1", "t2", "x"};
  for (int n = 0; n < ROWS; n++) {
    struct row *r = &rows[n];
    r->n = n;
    snprintf(r->owner, sizeof r->owner, "user-%d", n % 3);
    r->name = names[n];
    r->complexity = n;
    r->price = n * 1.5;
    r->done = n % 2 == 0;
    r->created_s = (int64_t)(n - 5) * 86400;
    r->created_ns = n;
    r->has_note = n % 3 != 0;
    snprintf(r->note, sizeof r->note, "note %d", n);
    r->has_rating = n % 4 != 0;
    r->rating = n;
    r->tag_count = 0;
    for (int t = 0; t < n % 4; t++) r->tags[r->tag_count++] = tag_pool[t];
    if (n % 5 == 0) r->tags[r->tag_count++] = "x";
    memset(r->code, 0, 16);
    r->code[15] = (uint8_t)n;
  }
}

static ferry_schema_t *make_schema(void) {
  /* Item and IItem are the same class, IItem with every scalar indexed */
  static ferry_property_info_t item[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, 0, NULL},
      {"itemName", FERRY_TYPE_STRING, 0, NULL},
      {"complexity", FERRY_TYPE_INT, 0, NULL},
      {"price", FERRY_TYPE_DOUBLE, 0, NULL},
      {"done", FERRY_TYPE_BOOL, 0, NULL},
      {"created", FERRY_TYPE_TIMESTAMP, 0, NULL},
      {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"rating", FERRY_TYPE_INT, FERRY_PROPERTY_OPTIONAL, NULL},
      {"tags", FERRY_TYPE_STRING, FERRY_PROPERTY_LIST, NULL},
      {"code", FERRY_TYPE_UUID, 0, NULL},
  };
  static ferry_property_info_t iitem[sizeof item / sizeof item[0]];
  for (size_t i = 0; i < sizeof item / sizeof item[0]; i++) {
    iitem[i] = item[i];
    if (i > 0 && !(item[i].flags & FERRY_PROPERTY_LIST)) iitem[i].flags |= FERRY_PROPERTY_INDEXED;
  }
  ferry_class_info_t classes[] = {
      {"Item", item, sizeof item / sizeof item[0], 0},
      {"IItem", iitem, sizeof iitem / sizeof iitem[0], 0},
  };
  ferry_schema_t *s = NULL;
  CHECK_OK(ferry_schema_new(&s, classes, 2));
  return s;
}

static void fill(ferry_db_t *db, const char *class_name) {
  ferry_class_key_t c = CLASS_KEY(db, class_name);
  ferry_property_key_t k_id = PROP_KEY(db, c, "_id"), k_owner = PROP_KEY(db, c, "ownerId"),
                       k_name = PROP_KEY(db, c, "itemName"), k_cx = PROP_KEY(db, c, "complexity"),
                       k_price = PROP_KEY(db, c, "price"), k_done = PROP_KEY(db, c, "done"),
                       k_created = PROP_KEY(db, c, "created"), k_note = PROP_KEY(db, c, "note"),
                       k_rating = PROP_KEY(db, c, "rating"), k_tags = PROP_KEY(db, c, "tags"),
                       k_code = PROP_KEY(db, c, "code");
  CHECK_OK(ferry_db_begin_write(db));
  /* insert in a scrambled order so that insertion order is not the answer to SORT */
  static const int order[ROWS] = {7, 2, 9, 0, 5, 3, 8, 1, 6, 4};
  for (int i = 0; i < ROWS; i++) {
    struct row *r = &rows[order[i]];
    ferry_property_value_t vals[] = {
        pv(k_id, v_oid_n((uint32_t)r->n)),
        pv(k_owner, v_str(r->owner)),
        pv(k_name, v_str(r->name)),
        pv(k_cx, v_int(r->complexity)),
        pv(k_price, v_double(r->price)),
        pv(k_done, v_bool(r->done)),
        pv(k_created, v_ts(r->created_s, r->created_ns)),
        pv(k_note, r->has_note ? v_str(r->note) : v_null()),
        pv(k_rating, r->has_rating ? v_int(r->rating) : v_null()),
        pv(k_code, v_uuid_bytes(r->code)),
    };
    CHECK_OK(ferry_object_create(db, c, vals, sizeof vals / sizeof vals[0]));
    ferry_value_t key = v_oid_n((uint32_t)r->n);
    for (int t = 0; t < r->tag_count; t++) {
      ferry_value_t tag = v_str(r->tags[t]);
      CHECK_OK(ferry_list_insert(db, c, &key, k_tags, (size_t)t, &tag));
    }
  }
  CHECK_OK(ferry_db_commit(db));
}

/* ---- predicates ---------------------------------------------------------------------------- */

static bool ci_prefix(const char *s, const char *p) { return strncasecmp(s, p, strlen(p)) == 0; }
static bool has_tag(const struct row *r, const char *t) {
  for (int i = 0; i < r->tag_count; i++)
    if (strcmp(r->tags[i], t) == 0) return true;
  return false;
}
static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}
static bool contains_ci(const char *s, const char *needle) { return strcasestr(s, needle) != NULL; }

typedef bool (*pred_fn)(const struct row *);
#define P(name, expr) \
  static bool name(const struct row *r) { (void)r; return (expr); }

P(p_le4, r->complexity <= 4)
P(p_lt4, r->complexity < 4)
P(p_gt4, r->complexity > 4)
P(p_ge4, r->complexity >= 4)
P(p_eq4, r->complexity == 4)
P(p_ne4, r->complexity != 4)
P(p_price, r->price > 4.5)
P(p_price_le, r->price <= 3.0)
P(p_done, r->done)
P(p_not_done, !r->done)
P(p_banana, strcmp(r->name, "Banana") == 0)
P(p_banana_ci, strcasecmp(r->name, "banana") == 0)
P(p_not_banana, strcmp(r->name, "Banana") != 0)
P(p_begins_a, strncmp(r->name, "a", 1) == 0)
P(p_begins_a_ci, ci_prefix(r->name, "a"))
P(p_ends_berry, ends_with(r->name, "berry"))
P(p_ends_ERRY_ci, ends_with(r->name, "berry") || ends_with(r->name, "Berry"))
P(p_contains_err, strstr(r->name, "err") != NULL)
P(p_contains_cherry_ci, contains_ci(r->name, "CHERRY"))
P(p_like_an, strstr(r->name, "an") != NULL)
P(p_like_q_ig, strlen(r->name) == 3 && strcmp(r->name + 1, "ig") == 0)
P(p_like_c_ci, tolower((unsigned char)r->name[0]) == 'c')
P(p_in_135, r->complexity == 1 || r->complexity == 3 || r->complexity == 5)
P(p_in_names, strcmp(r->name, "fig") == 0 || strcmp(r->name, "Date") == 0)
P(p_and, r->complexity > 2 && r->complexity < 6)
P(p_or, r->complexity < 2 || r->complexity > 7)
P(p_not_lt5, !(r->complexity < 5))
P(p_paren, (r->complexity < 2 || r->complexity > 7) && r->done)
P(p_precedence, r->complexity == 1 || (r->complexity == 2 && r->done))
P(p_true, true)
P(p_false, false)
P(p_note_nil, !r->has_note)
P(p_note_not_nil, r->has_note)
P(p_rating_nil, !r->has_rating)
P(p_rating_gt3, r->has_rating && r->rating > 3)
P(p_owner1_gt2, strcmp(r->owner, "user-1") == 0 && r->complexity > 2)
P(p_before_epoch, r->created_s < 0)
P(p_at_or_after_epoch, r->created_s >= 0)
P(p_created_eq_n3, r->n == 3)
P(p_oid7, r->n == 7)
P(p_code5, r->n == 5)
P(p_tags_gt2, r->tag_count > 2)
P(p_any_x, has_tag(r, "x"))
P(p_tags_combo, !(r->tag_count > 2) && has_tag(r, "x"))
P(p_not_nested, !(r->complexity < 3 || (r->done && r->complexity < 8)))

struct query_case {
  const char *query;
  pred_fn pred;
  size_t argc;
  ferry_value_t args[3];
};

static void run_case(ferry_db_t *db, ferry_class_key_t c, const struct query_case *qc,
                     const char *class_name) {
  ferry_results_t *res = NULL;
  int rc = ferry_db_query(&res, db, c, qc->query, qc->argc ? qc->args : NULL, qc->argc);
  CHECKF(rc == FERRY_OK, "%s: query \"%s\" failed with %d (%s)", class_name, qc->query, rc,
         ferry_strerror(rc));
  bool expected[ROWS] = {0}, got[ROWS] = {0};
  size_t expected_count = 0, count = 0;
  for (int n = 0; n < ROWS; n++)
    if (qc->pred(&rows[n])) expected[n] = true, expected_count++;
  CHECK_OK(ferry_results_count(&count, res));
  ferry_property_key_t k_cx = PROP_KEY(db, c, "complexity");
  for (size_t i = 0; i < count; i++) {
    ferry_object_t *o = NULL;
    ferry_value_t v;
    CHECK_OK(ferry_results_get(&o, res, i));
    CHECK_OK(ferry_object_get_value(&v, o, k_cx));
    CHECK(v.type == FERRY_TYPE_INT && v.u.i >= 0 && v.u.i < ROWS);
    CHECKF(!got[v.u.i], "%s: \"%s\" returned row %" PRId64 " twice", class_name, qc->query, v.u.i);
    got[v.u.i] = true;
    ferry_object_free(o);
  }
  char want[64] = "", have[64] = "";
  for (int n = 0; n < ROWS; n++) {
    if (expected[n]) snprintf(want + strlen(want), sizeof want - strlen(want), "%d ", n);
    if (got[n]) snprintf(have + strlen(have), sizeof have - strlen(have), "%d ", n);
  }
  CHECKF(count == expected_count && memcmp(expected, got, sizeof got) == 0,
         "%s: \"%s\" matched rows {%s}, expected {%s}", class_name, qc->query, have, want);
  ferry_results_free(res);
}

static void test_operators(ferry_db_t *db, const char *class_name) {
  ferry_class_key_t c = CLASS_KEY(db, class_name);
  uint8_t code5[16] = {0};
  code5[15] = 5;
  const struct query_case cases[] = {
      {"complexity <= 4", p_le4, 0, {{0}}},
      {"complexity < 4", p_lt4, 0, {{0}}},
      {"complexity > 4", p_gt4, 0, {{0}}},
      {"complexity >= 4", p_ge4, 0, {{0}}},
      {"complexity == 4", p_eq4, 0, {{0}}},
      {"complexity != 4", p_ne4, 0, {{0}}},
      {"complexity<=4", p_le4, 0, {{0}}},
      {"  complexity   <=\t4  ", p_le4, 0, {{0}}},
      {"complexity > -1", p_true, 0, {{0}}},
      {"price > 4.5", p_price, 0, {{0}}},
      {"price <= 3.0", p_price_le, 0, {{0}}},
      {"done == true", p_done, 0, {{0}}},
      {"done == false", p_not_done, 0, {{0}}},
      {"done != true", p_not_done, 0, {{0}}},
      {"itemName == \"Banana\"", p_banana, 0, {{0}}},
      {"itemName ==[c] \"banana\"", p_banana_ci, 0, {{0}}},
      {"itemName != \"Banana\"", p_not_banana, 0, {{0}}},
      {"itemName BEGINSWITH \"a\"", p_begins_a, 0, {{0}}},
      {"itemName BEGINSWITH[c] \"a\"", p_begins_a_ci, 0, {{0}}},
      {"itemName ENDSWITH \"berry\"", p_ends_berry, 0, {{0}}},
      {"itemName ENDSWITH[c] \"BERRY\"", p_ends_ERRY_ci, 0, {{0}}},
      {"itemName CONTAINS \"err\"", p_contains_err, 0, {{0}}},
      {"itemName CONTAINS[c] \"CHERRY\"", p_contains_cherry_ci, 0, {{0}}},
      {"itemName LIKE \"*an*\"", p_like_an, 0, {{0}}},
      {"itemName LIKE \"?ig\"", p_like_q_ig, 0, {{0}}},
      {"itemName LIKE[c] \"C*\"", p_like_c_ci, 0, {{0}}},
      {"complexity IN {1, 3, 5}", p_in_135, 0, {{0}}},
      {"itemName IN {\"fig\", \"Date\"}", p_in_names, 0, {{0}}},
      {"complexity > 2 AND complexity < 6", p_and, 0, {{0}}},
      {"complexity < 2 OR complexity > 7", p_or, 0, {{0}}},
      {"NOT (complexity < 5)", p_not_lt5, 0, {{0}}},
      {"(complexity < 2 OR complexity > 7) AND done == true", p_paren, 0, {{0}}},
      {"complexity == 1 OR complexity == 2 AND done == true", p_precedence, 0, {{0}}},
      {"NOT (complexity < 3 OR (done == true AND complexity < 8))", p_not_nested, 0, {{0}}},
      {"TRUEPREDICATE", p_true, 0, {{0}}},
      {"FALSEPREDICATE", p_false, 0, {{0}}},
      {"TRUEPREDICATE AND complexity <= 4", p_le4, 0, {{0}}},
      {"note == nil", p_note_nil, 0, {{0}}},
      {"note == null", p_note_nil, 0, {{0}}},
      {"note != nil", p_note_not_nil, 0, {{0}}},
      {"rating == nil", p_rating_nil, 0, {{0}}},
      {"rating > 3", p_rating_gt3, 0, {{0}}},
      {"complexity <= $0", p_le4, 1, {v_int(4)}},
      {"ownerId == $0 AND complexity > $1", p_owner1_gt2, 2, {v_str("user-1"), v_int(2)}},
      {"complexity > $1 AND ownerId == $0", p_owner1_gt2, 2, {v_str("user-1"), v_int(2)}},
      {"created < $0", p_before_epoch, 1, {v_ts(0, 0)}},
      {"created >= $0", p_at_or_after_epoch, 1, {v_ts(0, 0)}},
      {"created == $0", p_created_eq_n3, 1, {v_ts(-2 * 86400, 3)}},
      {"_id == $0", p_oid7, 1, {v_oid_n(7)}},
      {"code == $0", p_code5, 1, {v_uuid_bytes(code5)}},
      {"note == $0", p_note_nil, 1, {v_null()}},
      {"itemName BEGINSWITH[c] $0", p_begins_a_ci, 1, {v_str("A")}},
      {"complexity IN {$0, $1, $2}", p_in_135, 3, {v_int(1), v_int(3), v_int(5)}},
      {"tags.@count > 2", p_tags_gt2, 0, {{0}}},
      {"ANY tags == \"x\"", p_any_x, 0, {{0}}},
      {"NOT (tags.@count > 2) AND ANY tags == \"x\"", p_tags_combo, 0, {{0}}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(db, c, &cases[i], class_name);
}

/* ---- SORT and LIMIT -------------------------------------------------------------------------- */

static void check_order(ferry_db_t *db, ferry_class_key_t c, const char *query, const int *expected,
                        size_t n) {
  ferry_results_t *res = NULL;
  size_t count = 0;
  int rc = ferry_db_query(&res, db, c, query, NULL, 0);
  CHECKF(rc == FERRY_OK, "query \"%s\" failed with %d", query, rc);
  CHECK_OK(ferry_results_count(&count, res));
  CHECKF(count == n, "\"%s\": %zu results, expected %zu", query, count, n);
  ferry_property_key_t k_cx = PROP_KEY(db, c, "complexity");
  for (size_t i = 0; i < n; i++) {
    ferry_object_t *o = NULL;
    ferry_value_t v;
    CHECK_OK(ferry_results_get(&o, res, i));
    CHECK_OK(ferry_object_get_value(&v, o, k_cx));
    CHECKF(v.type == FERRY_TYPE_INT && v.u.i == expected[i],
           "\"%s\": result %zu is row %" PRId64 ", expected %d", query, i, v.u.i, expected[i]);
    ferry_object_free(o);
  }
  ferry_object_t *o = (ferry_object_t *)&o;
  CHECK_ERR(ferry_results_get(&o, res, n), FERRY_ERR_OUT_OF_RANGE);
  CHECK(o == (ferry_object_t *)&o);
  CHECK_ERR(ferry_results_get(&o, res, SIZE_MAX), FERRY_ERR_OUT_OF_RANGE);
  ferry_results_free(res);
}

static void test_sort_limit(ferry_db_t *db, const char *class_name) {
  ferry_class_key_t c = CLASS_KEY(db, class_name);
  static const int desc[] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  static const int asc[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  check_order(db, c, "TRUEPREDICATE SORT(complexity DESC)", desc, 10);
  check_order(db, c, "TRUEPREDICATE SORT(complexity ASC)", asc, 10);
  check_order(db, c, "complexity <= 4 SORT(complexity DESC)", desc + 5, 5);
  check_order(db, c, "TRUEPREDICATE SORT(complexity DESC) LIMIT(3)", desc, 3);
  check_order(db, c, "complexity > 100 SORT(complexity DESC) LIMIT(3)", desc, 0);
  check_order(db, c, "complexity >= 7 SORT(complexity ASC) LIMIT(10)", asc + 7, 3);
  /* owners: n % 3 -> user-0: 0 3 6 9, user-1: 1 4 7, user-2: 2 5 8 */
  static const int owner_then_desc[] = {9, 6, 3, 0, 7, 4, 1, 8, 5, 2};
  check_order(db, c, "TRUEPREDICATE SORT(ownerId ASC, complexity DESC)", owner_then_desc, 10);
  check_order(db, c, "TRUEPREDICATE SORT(ownerId ASC, complexity DESC) LIMIT(5)", owner_then_desc, 5);
  /* done (false < true), then price */
  static const int done_price[] = {1, 3, 5, 7, 9, 0, 2, 4, 6, 8};
  check_order(db, c, "TRUEPREDICATE SORT(done ASC, price ASC)", done_price, 10);
  /* timestamps before the epoch sort before those after it */
  check_order(db, c, "TRUEPREDICATE SORT(created ASC)", asc, 10);

  /* LIMIT without SORT: just the number */
  ferry_results_t *res = NULL;
  size_t count = 0;
  CHECK_OK(ferry_db_query(&res, db, c, "TRUEPREDICATE LIMIT(4)", NULL, 0));
  CHECK_OK(ferry_results_count(&count, res));
  CHECK_EQ_INT(count, 4);
  ferry_results_free(res);
}

/* ---- results are snapshots ------------------------------------------------------------------ */

static void test_snapshot(ferry_db_t *db) {
  ferry_class_key_t c = CLASS_KEY(db, "Item");
  ferry_results_t *res = NULL;
  size_t count = 0;
  CHECK_OK(ferry_db_query(&res, db, c, "complexity <= 4 SORT(complexity ASC)", NULL, 0));
  ferry_value_t k0 = v_oid_n(0);
  ferry_property_key_t k_name = PROP_KEY(db, c, "itemName");
  ferry_value_t renamed = v_str("renamed");
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_set(db, c, &k0, k_name, &renamed));
  ferry_value_t k1 = v_oid_n(1);
  CHECK_OK(ferry_object_delete(db, c, &k1));
  CHECK_OK(ferry_db_commit(db));
  CHECK_OK(ferry_results_count(&count, res));
  CHECK_EQ_INT(count, 5);
  ferry_object_t *o = NULL;
  ferry_value_t v;
  CHECK_OK(ferry_results_get(&o, res, 0));
  CHECK_OK(ferry_object_get_value(&v, o, k_name));
  CHECK_VALUE(v, v_str("Apple"));
  ferry_object_free(o);
  CHECK_OK(ferry_results_get(&o, res, 1)); /* deleted since, still in the snapshot */
  CHECK_OK(ferry_object_get_value(&v, o, k_name));
  CHECK_VALUE(v, v_str("apricot"));
  ferry_object_free(o);
  ferry_results_free(res);

  /* a new query sees the change; results read inside a write see its uncommitted writes */
  CHECK_OK(ferry_db_query(&res, db, c, "complexity <= 4", NULL, 0));
  CHECK_OK(ferry_results_count(&count, res));
  CHECK_EQ_INT(count, 4);
  ferry_results_free(res);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_delete(db, c, &k0));
  CHECK_OK(ferry_db_query(&res, db, c, "complexity <= 4", NULL, 0));
  CHECK_OK(ferry_results_count(&count, res));
  CHECK_EQ_INT(count, 3);
  ferry_results_free(res);
  CHECK_OK(ferry_db_cancel(db));
  CHECK_OK(ferry_db_query(&res, db, c, "itemName == \"renamed\"", NULL, 0));
  CHECK_OK(ferry_results_count(&count, res));
  CHECK_EQ_INT(count, 1);
  ferry_results_free(res);
}

/* ---- bad queries ------------------------------------------------------------------------------ */

/* Whether msg contains the decimal number n, not as part of a longer number. */
static bool mentions_number(const char *msg, size_t n) {
  char num[32];
  snprintf(num, sizeof num, "%zu", n);
  size_t len = strlen(num);
  for (const char *p = strstr(msg, num); p; p = strstr(p + 1, num)) {
    bool left_ok = p == msg || !isdigit((unsigned char)p[-1]);
    bool right_ok = !isdigit((unsigned char)p[len]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

static void test_bad_queries(ferry_db_t *db) {
  ferry_class_key_t c = CLASS_KEY(db, "Item");
  /* syntax errors, with the 0-based byte offset where the parser stopped */
  const struct {
    const char *query;
    size_t offset;
  } syntax[] = {
      {"complexity <= ", 14},           /* expected a value at the end */
      {"complexity <= 4 AND", 19},      /* expected a condition at the end */
      {"complexity <= 4)", 15},         /* an unexpected ')' */
      {"(complexity <= 4", 16},         /* expected ')' at the end */
      {"complexity <= 4 garbage", 16},  /* trailing input */
      {"complexity @@ 4", 11},          /* not an operator */
      {"complexity <= 4 AND AND done == true", 20},
      {"complexity IN {1, 2", 19},      /* expected '}' or ',' */
      {"TRUEPREDICATE SORT(complexity", 29},
      {"itemName == \"\xc3\xa9\" )", 17}, /* offsets count bytes, not characters */
  };
  for (size_t i = 0; i < sizeof syntax / sizeof syntax[0]; i++) {
    ferry_results_t *res = (ferry_results_t *)&res;
    int rc = ferry_db_query(&res, db, c, syntax[i].query, NULL, 0);
    CHECKF(rc == FERRY_ERR_QUERY, "\"%s\" returned %d, expected FERRY_ERR_QUERY", syntax[i].query, rc);
    CHECK_LAST_ERROR(FERRY_ERR_QUERY);
    CHECK(res == (ferry_results_t *)&res);
    const char *msg = ferry_error_last()->message;
    CHECKF(mentions_number(msg, syntax[i].offset),
           "the error for \"%s\" should mention offset %zu: \"%s\"", syntax[i].query,
           syntax[i].offset, msg);
  }
  /* queries that parse but do not fit the schema or the arguments */
  ferry_value_t one = v_int(1);
  const struct {
    const char *query;
    size_t argc;
  } semantic[] = {
      {"nosuch == 4", 0},
      {"complexity == \"four\"", 0},
      {"itemName > 4", 0},
      {"itemName BEGINSWITH 4", 0},
      {"complexity == $1", 1},     /* only $0 given */
      {"complexity == $0", 0},     /* no arguments */
      {"itemName == $0", 1},       /* an int for a string */
      {"TRUEPREDICATE SORT(nosuch ASC)", 0},
      {"TRUEPREDICATE SORT(tags ASC)", 0},
      {"TRUEPREDICATE LIMIT(-1)", 0},
      {"", 0},
      {"   ", 0},
  };
  for (size_t i = 0; i < sizeof semantic / sizeof semantic[0]; i++) {
    ferry_results_t *res = NULL;
    int rc = ferry_db_query(&res, db, c, semantic[i].query, semantic[i].argc ? &one : NULL,
                            semantic[i].argc);
    CHECKF(rc == FERRY_ERR_QUERY, "\"%s\" returned %d (%s), expected FERRY_ERR_QUERY",
           semantic[i].query, rc, ferry_strerror(rc));
    CHECK_LAST_ERROR(FERRY_ERR_QUERY);
    CHECK(res == NULL);
  }
  /* the message names the unknown property */
  ferry_results_t *res = NULL;
  CHECK_ERR(ferry_db_query(&res, db, c, "complexity > 1 AND zzzunknown == 4", NULL, 0), FERRY_ERR_QUERY);
  CHECKF(strstr(ferry_error_last()->message, "zzzunknown") != NULL,
         "the message should name the property: \"%s\"", ferry_error_last()->message);
  CHECK_ERR(ferry_db_query(&res, db, 77, "TRUEPREDICATE", NULL, 0), FERRY_ERR_NO_SUCH_CLASS);
  /* a very long and deeply nested query does not crash */
  static char deep[40000];
  size_t n = 0;
  for (int i = 0; i < 10000; i++) deep[n++] = '(';
  memcpy(deep + n, "TRUEPREDICATE", 13);
  n += 13;
  for (int i = 0; i < 10000; i++) deep[n++] = ')';
  deep[n] = '\0';
  int rc = ferry_db_query(&res, db, c, deep, NULL, 0);
  CHECKF(rc == FERRY_OK || rc == FERRY_ERR_QUERY, "deep nesting returned %d", rc);
  if (rc == FERRY_OK) ferry_results_free(res);
  res = NULL;
  deep[n - 1] = '\0'; /* unbalanced */
  CHECK_ERR(ferry_db_query(&res, db, c, deep, NULL, 0), FERRY_ERR_QUERY);
}

int main(void) {
  make_rows();
  ferry_schema_t *schema = make_schema();
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, test_path("query.ferry"), schema, FERRY_DELIVERY_LOOP, false));
  fill(db, "Item");
  fill(db, "IItem");
  test_operators(db, "Item");
  test_operators(db, "IItem");
  test_sort_limit(db, "Item");
  test_sort_limit(db, "IItem");
  test_bad_queries(db);
  test_snapshot(db);
  ferry_db_free(db);

  /* the same through an in-memory database */
  CHECK_OK(db_open_mem(&db, "test-query", schema, FERRY_DELIVERY_LOOP));
  fill(db, "Item");
  fill(db, "IItem");
  test_operators(db, "Item");
  test_operators(db, "IItem");
  test_sort_limit(db, "IItem");
  ferry_db_free(db);
  ferry_schema_free(schema);
  return check_done("test_query");
}
