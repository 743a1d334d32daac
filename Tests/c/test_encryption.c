/*
 * test_encryption.c — encryption at rest through the C API: a key in ferry_db_options_t
 * (version 2) encrypts the file and its WAL, a wrong, missing or unneeded key is
 * FERRY_ERR_DECRYPT with a message, a changed page is an error (never a crash, never garbage),
 * ferry_db_change_key converts files both ways, a version-1 options struct still opens, and
 * a file of encryption format version 1 opens and moves to version 2.
 */
#include "check.h"

#define MARKER "c-plaintext-marker-91d2"

static uint8_t key_a[FERRY_ENCRYPTION_KEY_SIZE];
static uint8_t key_b[FERRY_ENCRYPTION_KEY_SIZE];

static ferry_schema_t *note_schema(void) {
  static const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"text", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
  };
  ferry_class_info_t cls = {"Note", props, 2, FERRY_CLASS_NORMAL};
  ferry_schema_t *s = NULL;
  CHECK_OK(ferry_schema_new(&s, &cls, 1));
  return s;
}

static int open_with(ferry_db_t **out, const char *path, const ferry_schema_t *schema, const uint8_t *key) {
  ferry_db_options_t o;
  int rc = ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION);
  if (rc != FERRY_OK) return rc;
  o.path = path;
  o.schema = schema;
  o.delivery = FERRY_DELIVERY_POLL;
  o.encryption_key = key;
  return ferry_db_open(out, &o);
}

static void fill(ferry_db_t *db, int64_t from, int64_t count) {
  ferry_class_key_t cls = CLASS_KEY(db, "Note");
  ferry_property_key_t id = PROP_KEY(db, cls, "_id"), text = PROP_KEY(db, cls, "text");
  CHECK_OK(ferry_db_begin_write(db));
  for (int64_t i = from; i < from + count; i++) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s-%" PRId64, MARKER, i);
    ferry_property_value_t values[2] = {pv(id, v_int(i)), pv(text, v_str(buf))};
    CHECK_OK(ferry_object_create(db, cls, values, 2));
  }
  CHECK_OK(ferry_db_commit(db));
}

static size_t count_notes(ferry_db_t *db) {
  ferry_results_t *r = NULL;
  size_t n = 0;
  CHECK_OK(ferry_db_query(&r, db, CLASS_KEY(db, "Note"), "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&n, r));
  ferry_results_free(r);
  return n;
}

/* Whether the file contains the marker text. */
static bool file_contains(const char *path, const char *needle) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t cap = 1 << 20, len = 0, n;
  char *buf = malloc(cap);
  CHECK(buf != NULL);
  while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      CHECK(buf != NULL);
    }
  }
  fclose(f);
  bool found = memmem(buf, len, needle, strlen(needle)) != NULL;
  free(buf);
  return found;
}

static void check_decrypt_message(const char *words) {
  const ferry_error_t *e = ferry_error_last();
  CHECK_EQ_INT(e->code, FERRY_ERR_DECRYPT);
  CHECKF(strstr(e->message, words) != NULL, "message \"%s\" should contain \"%s\"", e->message, words);
}

static void test_round_trip_and_no_plaintext(ferry_schema_t *schema) {
  const char *path = test_path("enc.ferry");
  char wal[700];
  snprintf(wal, sizeof wal, "%s-wal", path);
  ferry_db_t *db = NULL;
  CHECK_OK(open_with(&db, path, schema, key_a));
  fill(db, 0, 300);
  CHECK(!file_contains(wal, MARKER));
  CHECK(!file_contains(path, MARKER));
  CHECK_OK(ferry_db_close(db));
  ferry_db_free(db);
  CHECK(!file_contains(path, MARKER));
  CHECK(!file_contains(path, "SQLite format 3"));

  db = NULL;
  CHECK_OK(open_with(&db, path, NULL, key_a));
  CHECK_EQ_INT(count_notes(db), 300);
  ferry_db_free(db);
}

static void test_wrong_missing_and_unneeded_keys(ferry_schema_t *schema) {
  const char *path = test_path("enc.ferry"); /* made by the round trip */
  ferry_db_t *db = NULL;
  CHECK_ERR(open_with(&db, path, NULL, key_b), FERRY_ERR_DECRYPT);
  check_decrypt_message("key does not decrypt");
  CHECK(db == NULL);
  CHECK_ERR(open_with(&db, path, NULL, NULL), FERRY_ERR_DECRYPT);
  check_decrypt_message("is encrypted");
  CHECK_STREQ(ferry_strerror(FERRY_ERR_DECRYPT), "cannot decrypt: wrong key or damaged file");

  const char *plain = test_path("plain.ferry");
  CHECK_OK(open_with(&db, plain, schema, NULL));
  fill(db, 0, 10);
  ferry_db_free(db);
  db = NULL;
  CHECK_ERR(open_with(&db, plain, NULL, key_a), FERRY_ERR_DECRYPT);
  check_decrypt_message("not encrypted");

  /* In-memory databases take no key. */
  ferry_db_options_t o;
  CHECK_OK(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION));
  CHECK(o.encryption_key == NULL);
  o.in_memory_identifier = "enc-mem";
  o.schema = schema;
  o.encryption_key = key_a;
  CHECK_ERR(ferry_db_open(&db, &o), FERRY_ERR_INVALID_ARGUMENT);
}

/* A host built against version 1 of ferry_db_options_t passes a shorter struct. */
static void test_version_one_options(ferry_schema_t *schema) {
  struct {
    uint32_t version;
    const char *path;
    const char *in_memory_identifier;
    const ferry_schema_t *schema;
    int32_t delivery;
    bool synced;
  } *v1 = malloc(sizeof *v1);
  CHECK(v1 != NULL);
  CHECK_OK(ferry_db_options_init((ferry_db_options_t *)(void *)v1, 1));
  v1->path = test_path("v1.ferry");
  v1->schema = schema;
  v1->delivery = FERRY_DELIVERY_POLL;
  ferry_db_t *db = NULL;
  CHECK_OK(ferry_db_open(&db, (const ferry_db_options_t *)(void *)v1));
  fill(db, 0, 3);
  ferry_db_free(db);
  free(v1);
  CHECK(file_contains(test_path("v1.ferry"), MARKER));
}

static void flip_byte(const char *path, long offset) {
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  fseek(f, offset, SEEK_SET);
  int b = fgetc(f);
  fseek(f, offset, SEEK_SET);
  fputc(b ^ 0x20, f);
  fclose(f);
}

static void test_tampered_pages(ferry_schema_t *schema) {
  const char *path = test_path("tamper.ferry");
  ferry_db_t *db = NULL;
  CHECK_OK(open_with(&db, path, schema, key_a));
  fill(db, 0, 2000);
  ferry_db_free(db);
  struct stat st;
  CHECK(stat(path, &st) == 0);
  for (long o = 4096 + 1000; o < st.st_size; o += 4096) flip_byte(path, o);
  db = NULL;
  int rc = open_with(&db, path, NULL, key_a);
  if (rc == FERRY_OK) {
    ferry_results_t *r = NULL;
    rc = ferry_db_query(&r, db, CLASS_KEY(db, "Note"), "text == 'nothing'", NULL, 0);
    ferry_results_free(r);
    ferry_db_free(db);
  }
  CHECK_EQ_INT(rc, FERRY_ERR_DECRYPT);
  check_decrypt_message("authentication");
}

static void test_change_key(ferry_schema_t *schema) {
  const char *path = test_path("convert.ferry");
  ferry_db_t *db = NULL;
  CHECK_OK(open_with(&db, path, schema, NULL));
  fill(db, 0, 100);
  ferry_db_free(db);
  CHECK(file_contains(path, MARKER));

  CHECK_ERR(ferry_db_change_key(NULL, NULL, key_a), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_db_change_key(test_path("missing.ferry"), NULL, key_a), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_OK(ferry_db_change_key(path, NULL, key_a));
  CHECK(!file_contains(path, MARKER));
  CHECK_ERR(ferry_db_change_key(path, key_b, NULL), FERRY_ERR_DECRYPT);
  CHECK_OK(ferry_db_change_key(path, key_a, key_b));
  db = NULL;
  CHECK_ERR(open_with(&db, path, NULL, key_a), FERRY_ERR_DECRYPT);
  CHECK_OK(open_with(&db, path, NULL, key_b));
  CHECK_EQ_INT(count_notes(db), 100);
  /* Not while open. */
  CHECK_ERR(ferry_db_change_key(path, key_b, NULL), FERRY_ERR_INVALID_ARGUMENT);
  ferry_db_free(db);
  CHECK_OK(ferry_db_change_key(path, key_b, NULL));
  CHECK(file_contains(path, MARKER));
  db = NULL;
  CHECK_OK(open_with(&db, path, NULL, NULL));
  CHECK_EQ_INT(count_notes(db), 100);
  ferry_db_free(db);
}

/* Copies a file; false if the source does not exist. */
static bool copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  if (!in) return false;
  FILE *out = fopen(to, "wb");
  CHECK(out != NULL);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
  fclose(in);
  fclose(out);
  return true;
}

/* Whether page 1 starts with format version 2's header ("FRY" 2, docs/encryption.md). */
static bool has_version_two_header(const char *path) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  unsigned char head[4] = {0};
  size_t n = fread(head, 1, 4, f);
  fclose(f);
  return n == 4 && memcmp(head, "FRY\x02", 4) == 0;
}

/* A file of format version 1 (Tests/Fixtures/encryption-v1, with its WAL as a crash left it)
 * opens through the C API, and ferry_db_change_key with the same key moves it to version 2
 * with every object (issue 22, point 4). */
static void test_version_one_file(void) {
  const char *path = test_path("v1.ferry");
  char wal[700];
  snprintf(wal, sizeof wal, "%s-wal", path);
  CHECK(copy_file(FERRY_REPO_DIR "/Tests/Fixtures/encryption-v1/v1.ferry", path));
  CHECK(copy_file(FERRY_REPO_DIR "/Tests/Fixtures/encryption-v1/v1.ferry-wal", wal));
  uint8_t key[FERRY_ENCRYPTION_KEY_SIZE];
  memset(key, 0x42, sizeof key);
  CHECK(!has_version_two_header(path));
  ferry_db_t *db = NULL;
  CHECK_OK(open_with(&db, path, NULL, key));
  ferry_results_t *r = NULL;
  size_t n = 0;
  CHECK_OK(ferry_db_query(&r, db, CLASS_KEY(db, "Item"), "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&n, r));
  ferry_results_free(r);
  CHECK_EQ_INT(n, 40);
  ferry_db_free(db);

  CHECK_OK(ferry_db_change_key(path, key, key));
  CHECK(has_version_two_header(path));
  CHECK(!file_contains(path, "plaintext-marker-7f3a"));
  db = NULL;
  CHECK_OK(open_with(&db, path, NULL, key));
  CHECK_OK(ferry_db_query(&r, db, CLASS_KEY(db, "Item"), "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&n, r));
  ferry_results_free(r);
  CHECK_EQ_INT(n, 40);
  ferry_db_free(db);
}

int main(void) {
  for (int i = 0; i < FERRY_ENCRYPTION_KEY_SIZE; i++) {
    key_a[i] = (uint8_t)(i * 7 + 1);
    key_b[i] = (uint8_t)(255 - i);
  }
  ferry_schema_t *schema = note_schema();
  test_round_trip_and_no_plaintext(schema);
  test_wrong_missing_and_unneeded_keys(schema);
  test_version_one_options(schema);
  test_tampered_pages(schema);
  test_change_key(schema);
  test_version_one_file();
  ferry_schema_free(schema);
  return check_done("test_encryption");
}
