/* latch.c — see latch.h. */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "latch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

void cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}

void latch_init(struct latch *l, long pending) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  cond_init_monotonic(&l->cv);
  l->pending = pending;
}

void latch_add(struct latch *l, long more) {
  pthread_mutex_lock(&l->mu);
  l->pending += more;
  pthread_mutex_unlock(&l->mu);
}

void latch_done(struct latch *l, const ferry_error_t *error) {
  pthread_mutex_lock(&l->mu);
  if (error && l->failed++ == 0) snprintf(l->first_error, sizeof l->first_error, "%s (%d)", error->message, error->code);
  if (--l->pending <= 0) pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

int latch_wait(struct latch *l, uint64_t deadline_us) {
  struct timespec deadline = timespec_of_us(deadline_us);
  int rc = 0;
  pthread_mutex_lock(&l->mu);
  while (l->pending > 0 && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&l->cv, &l->mu, &deadline);
  int late = l->pending > 0;
  pthread_mutex_unlock(&l->mu);
  return late ? -1 : 0;
}
