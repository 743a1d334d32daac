/*
 * demo.c — Ferry from C in one page: create a database with the Item schema, watch the query
 * `complexity <= 4`, write a few items in one transaction, query them, and print what the
 * notification reported next to the query's results.
 *
 * Build (from the repository root, after the library is built into build/):
 *   cc -std=c11 -Iinclude demo/demo.c -Lbuild -lferry -Wl,-rpath,"$PWD/build" -lpthread -o build/demo
 *   build/demo
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

/* Stops the demo with Ferry's own description of what went wrong. */
static void check(int rc, const char *what) {
  if (rc != FERRY_OK) {
    fprintf(stderr, "demo: %s failed: %s (%d): %s\n", what, ferry_strerror(rc), rc,
            ferry_error_last()->message);
    exit(1);
  }
}

/* ---- what the notification callback hands to the main thread -------------------------------- */

#define MAX_KEYS 64
struct observed {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  uint8_t inserted[MAX_KEYS][12];
  size_t n_inserted;
  uint8_t deleted[MAX_KEYS][12];
  size_t n_deleted;
  uint8_t modified[MAX_KEYS][12];
  size_t n_modified;
};

static void copy_ids(uint8_t (*dst)[12], size_t *n, const ferry_value_t *src, size_t count) {
  for (size_t i = 0; i < count && *n < MAX_KEYS; i++)
    if (src[i].type == FERRY_TYPE_OBJECT_ID) memcpy(dst[(*n)++], src[i].u.object_id, 12);
}

/* Runs on Ferry's loop thread: copy the keys (they are only valid during the call), wake main. */
static void on_items_changed(void *userdata, const ferry_change_set_t *changes) {
  struct observed *o = userdata;
  pthread_mutex_lock(&o->mu);
  copy_ids(o->inserted, &o->n_inserted, changes->inserted, changes->inserted_count);
  copy_ids(o->deleted, &o->n_deleted, changes->deleted, changes->deleted_count);
  copy_ids(o->modified, &o->n_modified, changes->modified, changes->modified_count);
  o->calls++;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

/* Waits (up to 10 s) for the callback's next call after `seen` calls. */
static void wait_for_call(struct observed *o, int seen) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += 10;
  pthread_mutex_lock(&o->mu);
  while (o->calls <= seen)
    if (pthread_cond_timedwait(&o->cv, &o->mu, &deadline) == ETIMEDOUT) {
      fprintf(stderr, "demo: no notification within 10 s\n");
      exit(1);
    }
  pthread_mutex_unlock(&o->mu);
}

/* ---- printing ---------------------------------------------------------------------------------- */

struct keys {
  ferry_class_key_t item;
  ferry_property_key_t id, owner, name, complexity;
};

static const char *hex(const uint8_t id[12]) {
  static char buf[4][25];
  static int next = 0;
  char *b = buf[next++ % 4];
  for (int i = 0; i < 12; i++) sprintf(b + 2 * i, "%02x", id[i]);
  return b;
}

/* Prints one item's fields from an object snapshot. */
static void print_item(const struct keys *k, const ferry_object_t *obj, const char *indent) {
  ferry_value_t id, owner, name, complexity;
  check(ferry_object_get_value(&id, obj, k->id), "reading _id");
  check(ferry_object_get_value(&owner, obj, k->owner), "reading ownerId");
  check(ferry_object_get_value(&name, obj, k->name), "reading itemName");
  check(ferry_object_get_value(&complexity, obj, k->complexity), "reading complexity");
  printf("%s%s  %-8.*s  %-7.*s  complexity %" PRId64 "\n", indent, hex(id.u.object_id),
         (int)name.u.string.size, name.u.string.data, (int)owner.u.string.size,
         owner.u.string.data, complexity.u.i);
}

/* Prints the item with this ObjectId, read back from the database. */
static void print_item_by_id(ferry_db_t *db, const struct keys *k, const uint8_t id[12]) {
  ferry_value_t key = {.type = FERRY_TYPE_OBJECT_ID};
  memcpy(key.u.object_id, id, 12);
  ferry_object_t *obj = NULL;
  int rc = ferry_object_get(&obj, db, k->item, &key);
  if (rc == FERRY_ERR_NOT_FOUND) {
    printf("    %s  (deleted)\n", hex(id));
    return;
  }
  check(rc, "ferry_object_get");
  print_item(k, obj, "    ");
  ferry_object_free(obj);
}

static void print_changes(ferry_db_t *db, const struct keys *k, struct observed *o) {
  pthread_mutex_lock(&o->mu);
  printf("  notification: %zu inserted, %zu modified, %zu deleted\n", o->n_inserted, o->n_modified,
         o->n_deleted);
  for (size_t i = 0; i < o->n_inserted; i++) {
    printf("   inserted");
    print_item_by_id(db, k, o->inserted[i]);
  }
  for (size_t i = 0; i < o->n_modified; i++) {
    printf("   modified");
    print_item_by_id(db, k, o->modified[i]);
  }
  for (size_t i = 0; i < o->n_deleted; i++) printf("   left the results: %s\n", hex(o->deleted[i]));
  o->n_inserted = o->n_modified = o->n_deleted = 0;
  pthread_mutex_unlock(&o->mu);
}

static void print_query(ferry_db_t *db, const struct keys *k, const char *query) {
  ferry_results_t *results = NULL;
  size_t count = 0;
  check(ferry_db_query(&results, db, k->item, query, NULL, 0), "ferry_db_query");
  check(ferry_results_count(&count, results), "ferry_results_count");
  printf("  query \"%s\": %zu items\n", query, count);
  for (size_t i = 0; i < count; i++) {
    ferry_object_t *obj = NULL;
    check(ferry_results_get(&obj, results, i), "ferry_results_get");
    print_item(k, obj, "    ");
    ferry_object_free(obj);
  }
  ferry_results_free(results);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

int main(void) {
  printf("Ferry %s: a local database, a query notification, a write, a query\n\n", ferry_version());

  char dir[] = "/tmp/ferry-demo-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  char path[sizeof dir + 16];
  snprintf(path, sizeof path, "%s/items.ferry", dir);

  /* The schema: the Item type of the Flexible Sync examples. */
  static const ferry_property_info_t item_props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_INDEXED, NULL},
  };
  const ferry_class_info_t classes[] = {{"Item", item_props, 4, FERRY_CLASS_NORMAL}};
  ferry_schema_t *schema = NULL;
  check(ferry_schema_new(&schema, classes, 1), "ferry_schema_new");

  ferry_db_options_t options;
  check(ferry_db_options_init(&options, FERRY_DB_OPTIONS_VERSION), "ferry_db_options_init");
  options.path = path;
  options.schema = schema;
  options.delivery = FERRY_DELIVERY_LOOP; /* callbacks on Ferry's loop thread */
  ferry_db_t *db = NULL;
  check(ferry_db_open(&db, &options), "ferry_db_open");
  ferry_schema_free(schema); /* the database keeps its own copy */
  printf("1. opened %s\n", path);

  struct keys k;
  check(ferry_db_find_class(&k.item, db, "Item"), "find Item");
  check(ferry_db_find_property(&k.id, db, k.item, "_id"), "find _id");
  check(ferry_db_find_property(&k.owner, db, k.item, "ownerId"), "find ownerId");
  check(ferry_db_find_property(&k.name, db, k.item, "itemName"), "find itemName");
  check(ferry_db_find_property(&k.complexity, db, k.item, "complexity"), "find complexity");

  /* Watch the query the Flexible Sync examples subscribe to. */
  struct observed seen = {.calls = 0};
  pthread_mutex_init(&seen.mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&seen.cv, &attr);
  pthread_condattr_destroy(&attr);
  ferry_notification_token_t *token = NULL;
  check(ferry_db_observe_query(&token, db, k.item, "complexity <= 4", NULL, 0, on_items_changed,
                               &seen, NULL),
        "ferry_db_observe_query");
  printf("2. watching \"complexity <= 4\"\n");

  /* Six items in one write transaction (one history changeset). */
  static const int64_t complexities[] = {1, 7, 3, 9, 4, 5};
  static const char *const owners[] = {"alice", "bob", "carol"};
  uint8_t third[12];
  check(ferry_db_begin_write(db), "ferry_db_begin_write");
  for (int i = 0; i < 6; i++) {
    char name[16];
    snprintf(name, sizeof name, "item-%d", i);
    ferry_property_value_t values[4];
    values[0].property = k.id;
    check(ferry_object_id_generate(&values[0].value), "ferry_object_id_generate");
    if (i == 2) memcpy(third, values[0].value.u.object_id, 12);
    values[1] = (ferry_property_value_t){k.owner, {.type = FERRY_TYPE_STRING}};
    values[1].value.u.string.data = owners[i % 3];
    values[1].value.u.string.size = strlen(owners[i % 3]);
    values[2] = (ferry_property_value_t){k.name, {.type = FERRY_TYPE_STRING}};
    values[2].value.u.string.data = name;
    values[2].value.u.string.size = strlen(name);
    values[3] = (ferry_property_value_t){k.complexity, {.type = FERRY_TYPE_INT, .u.i = complexities[i]}};
    check(ferry_object_create(db, k.item, values, 4), "ferry_object_create");
  }
  int calls = seen.calls;
  check(ferry_db_commit(db), "ferry_db_commit");
  printf("3. wrote 6 items (complexity 1, 7, 3, 9, 4, 5) in one transaction\n");
  wait_for_call(&seen, calls);
  print_changes(db, &k, &seen);
  print_query(db, &k, "complexity <= 4 SORT(complexity ASC)");

  /* One item leaves the results, another one changes inside them. */
  calls = seen.calls;
  check(ferry_db_begin_write(db), "ferry_db_begin_write");
  ferry_value_t key = {.type = FERRY_TYPE_OBJECT_ID}, eight = {.type = FERRY_TYPE_INT, .u.i = 8};
  memcpy(key.u.object_id, third, 12);
  check(ferry_object_set(db, k.item, &key, k.complexity, &eight), "ferry_object_set");
  check(ferry_db_commit(db), "ferry_db_commit");
  printf("\n4. set item-2's complexity to 8\n");
  wait_for_call(&seen, calls);
  print_changes(db, &k, &seen);
  print_query(db, &k, "complexity <= 4 SORT(complexity ASC)");
  print_query(db, &k, "ownerId == \"bob\" SORT(complexity DESC)");

  uint64_t changesets = 0;
  check(ferry_db_history_count(&changesets, db), "ferry_db_history_count");
  check(ferry_db_verify_history(db), "ferry_db_verify_history");
  printf("\n5. history: %" PRIu64 " changesets (one per write transaction), consistent with the data\n",
         changesets);

  ferry_notification_token_free(token);
  ferry_db_free(db);
  pthread_cond_destroy(&seen.cv);
  pthread_mutex_destroy(&seen.mu);
  nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  printf("done\n");
  return 0;
}
