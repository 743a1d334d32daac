/*
 * verify.h — the lost-writes check: does an observer's database hold exactly what its
 * writer committed?
 *
 * The oracle is the writer's own count of committed writes (seq 0 .. committed-1 of its
 * stream, item.h): what the host intended, not another replica. After the drain, every
 * Item in the observer's file is read back and compared with it, the values included.
 */
#ifndef LOAD_VERIFY_H
#define LOAD_VERIFY_H

#include <stdint.h>

#include "device.h"

struct verdict {
  uint64_t expected; /* committed by the writer */
  uint64_t found;    /* present with the right owner and name */
  uint64_t lost;     /* committed, not present (expected - found) */
  uint64_t wrong;    /* present with another owner or name than committed */
  uint64_t extra;    /* present but never committed by this writer (or twice) */
};

/* Reads every Item of d's file; 0, or -1 when the database cannot be read (printed). */
int verify_items(struct verdict *v, struct device *d, uint32_t stream, uint64_t committed);

#endif
