/*
 * writer.h — the writing devices: at a rate, or as fast as they can.
 *
 * Each writer commits Items of its own stream (item.h: seq 0, 1, 2, ...), `batch` per write
 * transaction, and counts what it committed: that count is the oracle the lost-writes check
 * compares observers with. After each commit it asks Ferry to call back once the server has
 * acknowledged it (ferry_sync_wait_for_upload: the server's commit is durable), which gives
 * SAMPLE_ACK and the count of changesets the server integrated.
 *
 * A few threads drive all the writers of a process. At a rate, each writer has its own
 * schedule (an open loop: a late write is written at once and the next stays on schedule,
 * and each write's lateness is kept as SAMPLE_LAG), phase-shifted by its stream number so
 * that thousands of writers do not all write at the same instant.
 */
#ifndef LOAD_WRITER_H
#define LOAD_WRITER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"

struct writer {
  struct device *device;
  uint32_t stream;
  atomic_uint_fast64_t committed; /* items committed; seq 0 .. committed-1 */
  atomic_uint_fast64_t acked;     /* items the server acknowledged */
  uint64_t due_us;                /* at a rate: when the next write is due */
  int failed;                     /* a commit failed: the writer stopped (printed) */
};

struct writer_plan {
  double rate;      /* transactions per second per writer; 0: as fast as possible */
  uint32_t batch;   /* items per transaction (1: one small Item per transaction) */
  uint64_t limit;   /* items per writer, then it stops; 0: until writers_stop */
  int threads;      /* threads driving this process's writers */
};

void writer_init(struct writer *w, struct device *d, uint32_t stream);
/* Starts the writers' threads at start_us. */
int writers_start(struct writer **writers, size_t n, const struct writer_plan *plan, uint64_t start_us);
/* Asks every writer to stop after its current transaction (from any thread). */
void writers_stop(void);
/* Waits for the threads to end (after writers_stop, or after every writer's limit). */
void writers_join(void);
/* Waits until every committed item is acknowledged, or deadline_us; the items still
 * unacknowledged then. */
uint64_t writers_wait_acked(struct writer **writers, size_t n, uint64_t deadline_us);

#endif
