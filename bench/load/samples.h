/*
 * samples.h — the timings a worker hands to the driver.
 *
 * Every measured event is one fixed-size record: when its subject started (CLOCK_MONOTONIC
 * microseconds, comparable across the run's processes) and how long it took. Workers
 * append records in memory and write them, raw, to their --samples file at the end; `stats`
 * merges the files of all workers and computes percentiles, per-second tables and windows.
 */
#ifndef LOAD_SAMPLES_H
#define LOAD_SAMPLES_H

#include <stdint.h>

enum sample_kind {
  SAMPLE_NOTIFY = 0,  /* a write: the writer's begin_write -> an observer's notification naming it */
  SAMPLE_COMMIT = 1,  /* a write: begin_write -> ferry_db_commit returned (the local, durable commit) */
  SAMPLE_ACK = 2,     /* a write: begin_write -> the server's durable acknowledgement (wait_for_upload) */
  SAMPLE_CONNECT = 3, /* a device: login started -> its subscription complete on the server */
  SAMPLE_LOGIN = 4,   /* a device: login started -> logged in */
  SAMPLE_LAG = 5,     /* a write at a rate: when it was due -> when it began (the generator's lateness) */
};

struct sample {
  uint64_t start_us;
  uint32_t duration_us;
  uint32_t kind;
};

/* Thread-safe; callable from Ferry's loop thread (it never blocks for long). */
void samples_add(enum sample_kind kind, uint64_t start_us, uint64_t end_us);

/* Writes every record to path (raw structs, native byte order: read on the same machine).
 * Returns the number written, or -1 (errno set). */
long samples_write(const char *path);

#endif
