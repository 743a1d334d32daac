/* item.c — see item.h. */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "item.h"

#include <stdio.h>
#include <string.h>

int item_keys_find(struct item_keys *k, ferry_db_t *db) {
  if (ferry_db_find_class(&k->item, db, "Item") != FERRY_OK || ferry_db_find_property(&k->id, db, k->item, "_id") != FERRY_OK ||
      ferry_db_find_property(&k->owner, db, k->item, "ownerId") != FERRY_OK ||
      ferry_db_find_property(&k->name, db, k->item, "itemName") != FERRY_OK ||
      ferry_db_find_property(&k->complexity, db, k->item, "complexity") != FERRY_OK) {
    fprintf(stderr, "load: the Item schema: %s\n", ferry_error_last()->message);
    return -1;
  }
  return 0;
}

ferry_schema_t *item_schema(void) {
  static const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_NORMAL, NULL},
  };
  const ferry_class_info_t classes[] = {{"Item", props, 4, FERRY_CLASS_NORMAL}};
  ferry_schema_t *schema = NULL;
  if (ferry_schema_new(&schema, classes, 1) != FERRY_OK) {
    fprintf(stderr, "load: schema: %s\n", ferry_error_last()->message);
    return NULL;
  }
  return schema;
}

void item_id(ferry_value_t *out, uint32_t stream, uint32_t seq, uint64_t written_us) {
  memset(out, 0, sizeof *out);
  out->type = FERRY_TYPE_OBJECT_ID;
  uint8_t *b = out->u.object_id;
  b[0] = (uint8_t)(stream >> 16), b[1] = (uint8_t)(stream >> 8), b[2] = (uint8_t)stream;
  b[3] = (uint8_t)(seq >> 16), b[4] = (uint8_t)(seq >> 8), b[5] = (uint8_t)seq;
  for (int i = 0; i < 6; i++) b[6 + i] = (uint8_t)(written_us >> (40 - 8 * i));
}

int item_id_decode(const ferry_value_t *id, uint32_t *stream, uint32_t *seq, uint64_t *written_us) {
  if (id->type != FERRY_TYPE_OBJECT_ID) return -1;
  const uint8_t *b = id->u.object_id;
  *stream = (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
  *seq = (uint32_t)b[3] << 16 | (uint32_t)b[4] << 8 | b[5];
  uint64_t t = 0;
  for (int i = 0; i < 6; i++) t = t << 8 | b[6 + i];
  *written_us = t;
  return 0;
}

int item_name(char *out, size_t size, uint32_t stream, uint32_t seq) {
  return snprintf(out, size, "s%u-%u", (unsigned)stream, (unsigned)seq);
}

int item_create(ferry_db_t *db, const struct item_keys *k, const char *owner_id, uint32_t stream, uint32_t seq,
                uint64_t written_us) {
  char name[32];
  int len = item_name(name, sizeof name, stream, seq);
  ferry_property_value_t v[4] = {
      {k->id, {.type = FERRY_TYPE_NULL}},
      {k->owner, {.type = FERRY_TYPE_STRING, .u.string = {owner_id, strlen(owner_id)}}},
      {k->name, {.type = FERRY_TYPE_STRING, .u.string = {name, (size_t)len}}},
      {k->complexity, {.type = FERRY_TYPE_INT, .u.i = seq % 10}},
  };
  item_id(&v[0].value, stream, seq, written_us);
  return ferry_object_create(db, k->item, v, 4);
}
