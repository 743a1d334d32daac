/* writer.c — see writer.h. */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "writer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "latch.h"
#include "samples.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;   /* writers_stop wakes writers waiting for their next due time */
static pthread_cond_t acked;  /* an acknowledgement arrived */
static int stopping;
static pthread_t *threads;
static int thread_count;

struct thread_job {
  struct writer **writers; /* this thread's writers */
  size_t n;
  struct writer_plan plan;
};

void writer_init(struct writer *w, struct device *d, uint32_t stream) {
  w->device = d;
  w->stream = stream;
  atomic_init(&w->committed, 0);
  atomic_init(&w->acked, 0);
  w->due_us = 0;
  w->failed = 0;
}

struct ack {
  struct writer *writer;
  uint64_t begun_us;
  uint32_t items;
};

static void on_ack(void *userdata, const ferry_error_t *e) {
  struct ack *a = userdata;
  if (!e) {
    samples_add(SAMPLE_ACK, a->begun_us, now_us());
    atomic_fetch_add(&a->writer->acked, a->items);
  }
  pthread_mutex_lock(&lock);
  pthread_cond_broadcast(&acked);
  pthread_mutex_unlock(&lock);
  free(a);
}

/* One transaction of `batch` items; 0 or -1 (printed, the writer stops). */
static int write_once(struct writer *w, uint32_t batch) {
  struct device *d = w->device;
  uint64_t seq = atomic_load(&w->committed);
  if (seq + batch > ITEM_MAX_SEQ + 1) {
    fprintf(stderr, "load: writer %s: more than %u items, the most an id can number (item.h)\n", d->subject, ITEM_MAX_SEQ + 1);
    return -1;
  }
  uint64_t begun = now_us();
  int rc = ferry_db_begin_write(d->db);
  for (uint32_t i = 0; rc == FERRY_OK && i < batch; i++) rc = item_create(d->db, &d->keys, d->user_id, w->stream, (uint32_t)(seq + i), begun);
  if (rc == FERRY_OK) rc = ferry_db_commit(d->db);
  else ferry_db_cancel(d->db);
  if (rc != FERRY_OK) {
    fprintf(stderr, "load: writer %s: %s (%d)\n", d->subject, ferry_error_last()->message, rc);
    return -1;
  }
  uint64_t committed = now_us();
  for (uint32_t i = 0; i < batch; i++) samples_add(SAMPLE_COMMIT, begun, committed);
  atomic_store(&w->committed, seq + batch);
  struct ack *a = malloc(sizeof *a);
  *a = (struct ack){.writer = w, .begun_us = begun, .items = batch};
  if (ferry_sync_wait_for_upload(d->session, on_ack, a) != FERRY_OK) free(a);
  return 0;
}

static int stop_requested(void) {
  pthread_mutex_lock(&lock);
  int s = stopping;
  pthread_mutex_unlock(&lock);
  return s;
}

/* Sleeps until due_us unless writers_stop comes first; 0, or -1 when stopping. */
static int wait_until(uint64_t due_us) {
  struct timespec t = timespec_of_us(due_us);
  pthread_mutex_lock(&lock);
  while (!stopping && now_us() < due_us)
    if (pthread_cond_timedwait(&wake, &lock, &t) == ETIMEDOUT) break;
  int s = stopping;
  pthread_mutex_unlock(&lock);
  return s ? -1 : 0;
}

static int done(const struct writer *w, const struct writer_plan *p) {
  return w->failed || (p->limit && atomic_load(&w->committed) >= p->limit);
}

static void *writer_thread(void *u) {
  struct thread_job *j = u;
  const struct writer_plan *p = &j->plan;
  for (;;) {
    struct writer *next = NULL;
    for (size_t i = 0; i < j->n; i++) {
      struct writer *w = j->writers[i];
      if (!done(w, p) && (!next || w->due_us < next->due_us)) next = w;
    }
    if (!next) break;
    if (p->rate > 0) {
      if (wait_until(next->due_us) != 0) break;
      uint64_t begun = now_us();
      samples_add(SAMPLE_LAG, next->due_us, begun);
      next->due_us += (uint64_t)(1e6 / p->rate);
    } else {
      if (stop_requested()) break;
      next->due_us++; /* round robin: the writer written longest ago goes next */
    }
    uint32_t batch = p->batch;
    if (p->limit && atomic_load(&next->committed) + batch > p->limit) batch = (uint32_t)(p->limit - atomic_load(&next->committed));
    if (write_once(next, batch) != 0) next->failed = 1;
  }
  free(j->writers);
  free(j);
  return NULL;
}

int writers_start(struct writer **writers, size_t n, const struct writer_plan *plan, uint64_t start_us) {
  cond_init_monotonic(&wake);
  cond_init_monotonic(&acked);
  stopping = 0;
  int t = plan->threads < 1 ? 1 : plan->threads;
  if ((size_t)t > n) t = (int)(n ? n : 1);
  threads = calloc((size_t)t, sizeof *threads);
  thread_count = t;
  for (size_t i = 0; i < n; i++) {
    /* The golden ratio's fractional parts spread any number of phases evenly over a period. */
    double phase = plan->rate > 0 ? fmod(writers[i]->stream * 0.6180339887498949, 1.0) / plan->rate : 0;
    writers[i]->due_us = start_us + (uint64_t)(phase * 1e6);
  }
  for (int k = 0; k < t; k++) {
    struct thread_job *j = calloc(1, sizeof *j);
    j->plan = *plan;
    j->writers = calloc(n / (size_t)t + 1, sizeof *j->writers);
    for (size_t i = (size_t)k; i < n; i += (size_t)t) j->writers[j->n++] = writers[i];
    if (pthread_create(&threads[k], NULL, writer_thread, j) != 0) {
      fprintf(stderr, "load: cannot start writer thread %d\n", k);
      return -1;
    }
  }
  return 0;
}

void writers_stop(void) {
  pthread_mutex_lock(&lock);
  stopping = 1;
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
}

void writers_join(void) {
  for (int k = 0; k < thread_count; k++) pthread_join(threads[k], NULL);
  free(threads);
  threads = NULL, thread_count = 0;
}

uint64_t writers_wait_acked(struct writer **writers, size_t n, uint64_t deadline_us) {
  struct timespec t = timespec_of_us(deadline_us);
  uint64_t missing;
  pthread_mutex_lock(&lock);
  for (;;) {
    missing = 0;
    for (size_t i = 0; i < n; i++) missing += atomic_load(&writers[i]->committed) - atomic_load(&writers[i]->acked);
    if (missing == 0 || pthread_cond_timedwait(&acked, &lock, &t) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&lock);
  return missing;
}
