/* verify.c — see verify.h. */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_string(const ferry_value_t *v, const char *s, size_t n) {
  return v->type == FERRY_TYPE_STRING && v->u.string.size == n && memcmp(v->u.string.data, s, n) == 0;
}

int verify_items(struct verdict *v, struct device *d, uint32_t stream, uint64_t committed) {
  memset(v, 0, sizeof *v);
  v->expected = committed;
  ferry_results_t *r = NULL;
  size_t count = 0;
  if (ferry_db_query(&r, d->db, d->keys.item, "TRUEPREDICATE", NULL, 0) != FERRY_OK || ferry_results_count(&count, r) != FERRY_OK) {
    fprintf(stderr, "load: reading back %s: %s\n", d->path, ferry_error_last()->message);
    ferry_results_free(r);
    return -1;
  }
  uint8_t *seen = calloc(committed ? committed : 1, 1);
  size_t owner_size = strlen(d->user_id);
  for (size_t i = 0; i < count; i++) {
    ferry_object_t *o = NULL;
    ferry_value_t id, owner, name;
    uint32_t s, seq;
    uint64_t written;
    if (ferry_results_get(&o, r, i) != FERRY_OK || ferry_object_get_value(&id, o, d->keys.id) != FERRY_OK ||
        ferry_object_get_value(&owner, o, d->keys.owner) != FERRY_OK || ferry_object_get_value(&name, o, d->keys.name) != FERRY_OK) {
      fprintf(stderr, "load: reading back %s: %s\n", d->path, ferry_error_last()->message);
      ferry_object_free(o);
      free(seen);
      ferry_results_free(r);
      return -1;
    }
    if (item_id_decode(&id, &s, &seq, &written) != 0 || s != stream || seq >= committed || seen[seq]) {
      v->extra++;
    } else {
      char expected_name[32];
      int n = item_name(expected_name, sizeof expected_name, stream, seq);
      seen[seq] = 1;
      if (same_string(&owner, d->user_id, owner_size) && same_string(&name, expected_name, (size_t)n)) v->found++;
      else v->wrong++;
    }
    ferry_object_free(o);
  }
  free(seen);
  ferry_results_free(r);
  v->lost = committed - v->found - v->wrong;
  return 0;
}
