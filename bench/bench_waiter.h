/*
 * bench_waiter.h — what the sync benchmarks (sync.c, budgets/workload.c) share: failing fast
 * on a Ferry error, and waiting on a Ferry callback (status or user) from the host's thread.
 * Each program defines BENCH_NAME, the prefix of its error messages, before including it.
 */
#ifndef FERRY_BENCH_WAITER_H
#define FERRY_BENCH_WAITER_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry.h"

static void check(int rc, const char *what) {
  if (rc != FERRY_OK) {
    fprintf(stderr, "%s: %s failed: %s (%d): %s\n", BENCH_NAME, what, ferry_strerror(rc), rc, ferry_error_last()->message);
    exit(1);
  }
}

struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, code;
  ferry_user_t *user;
  char message[512];
};

static void waiter_init(struct waiter *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
}

static void finish(struct waiter *w, const ferry_error_t *e) {
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  w->code = e ? e->code : 0;
  if (e) snprintf(w->message, sizeof w->message, "%s", e->message);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void on_status(void *u, const ferry_error_t *e) { finish(u, e); }
static void on_user(void *u, ferry_user_t *user, const ferry_error_t *e) {
  ((struct waiter *)u)->user = user;
  finish(u, e);
}

/* Waits until the callback came; exits with its message if it reported an error. */
static void wait_done(struct waiter *w, const char *what) {
  pthread_mutex_lock(&w->mu);
  while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
  if (w->code) {
    fprintf(stderr, "%s: %s failed: %s\n", BENCH_NAME, what, w->message);
    exit(1);
  }
}

#endif
