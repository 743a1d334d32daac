/*
 * latch.h — waiting for many asynchronous completions at once, with a deadline.
 *
 * Ferry's asynchronous calls (logins, subscription waits, upload waits) complete on its
 * loop thread; the load tool starts hundreds of them and waits for all, never longer than
 * a timeout, so a server that stops answering fails the run instead of hanging it.
 */
#ifndef LOAD_LATCH_H
#define LOAD_LATCH_H

#include <pthread.h>
#include <stdint.h>

#include "ferry.h"

struct latch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long pending;
  long failed;
  char first_error[256];
};

void latch_init(struct latch *l, long pending);
/* Adds work to wait for (before starting it). */
void latch_add(struct latch *l, long more);
/* One completion; error NULL for success (its message is kept for the first failure). */
void latch_done(struct latch *l, const ferry_error_t *error);
/* Waits until nothing is pending or until deadline_us (clock.h). 0, or -1 on the deadline. */
int latch_wait(struct latch *l, uint64_t deadline_us);

/* A condition variable on CLOCK_MONOTONIC, the clock of every deadline here. */
void cond_init_monotonic(pthread_cond_t *cv);

#endif
