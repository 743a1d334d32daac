/*
 * item.h — the Items the load tool writes, and how an observer recognises them.
 *
 * An Item of the seeds' app (examples/item-app): `_id` ObjectId, `ownerId` (the writer's user
 * id: the app's rules let a user write and read only its own items), `itemName`, `complexity`.
 * The load tool chooses the `_id` itself so that any observer, in any process, learns from
 * the notification's primary key alone which write it is and when it was made:
 *
 *   bytes 0-2   stream: which writer wrote it (a pair's index; 0 for the fan-out writer)
 *   bytes 3-5   seq: the writer's count of items before this one (0, 1, 2, ...)
 *   bytes 6-11  the writer's begin_write time, CLOCK_MONOTONIC microseconds (clock.h)
 *
 * `itemName` is "s<stream>-<seq>": the check for lost writes compares it too, so an object
 * that arrived with another value than the writer committed counts as wrong.
 */
#ifndef LOAD_ITEM_H
#define LOAD_ITEM_H

#include <stddef.h>
#include <stdint.h>

#include "ferry.h"

#define ITEM_MAX_STREAM 0xFFFFFFu
#define ITEM_MAX_SEQ 0xFFFFFFu

struct item_keys {
  ferry_class_key_t item;
  ferry_property_key_t id, owner, name, complexity;
};

/* Looks up the Item class and its properties in an open database; 0 or -1 (message printed). */
int item_keys_find(struct item_keys *k, ferry_db_t *db);

/* The schema every device opens with (the app's Item); the caller frees it. */
ferry_schema_t *item_schema(void);

void item_id(ferry_value_t *out, uint32_t stream, uint32_t seq, uint64_t written_us);
/* 0 for an id made by item_id, -1 for any other value. */
int item_id_decode(const ferry_value_t *id, uint32_t *stream, uint32_t *seq, uint64_t *written_us);
/* "s<stream>-<seq>"; returns its length. */
int item_name(char *out, size_t size, uint32_t stream, uint32_t seq);

/* Creates one Item inside the caller's write transaction; FERRY_OK or the error code. */
int item_create(ferry_db_t *db, const struct item_keys *k, const char *owner_id, uint32_t stream, uint32_t seq,
                uint64_t written_us);

#endif
