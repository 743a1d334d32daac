/* observer.c — see observer.h. One lock and condition for all observers of the process:
 * notifications run on Ferry's single loop thread, so the lock is only ever contended by the
 * main thread's checks. */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "observer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "latch.h"
#include "samples.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress;
static pthread_once_t progress_once = PTHREAD_ONCE_INIT;
static void progress_init(void) { cond_init_monotonic(&progress); }

static int complete(const struct observer *o) { return o->expecting && o->delivered >= o->expected; }

static int grow_seen(struct observer *o, uint32_t seq) {
  size_t size = o->seen_size ? o->seen_size : 1024;
  while (size <= seq) size *= 2;
  uint8_t *s = realloc(o->seen, size);
  if (!s) return -1;
  memset(s + o->seen_size, 0, size - o->seen_size);
  o->seen = s, o->seen_size = size;
  return 0;
}

static void on_items(void *userdata, const ferry_change_set_t *c) {
  struct observer *o = userdata;
  uint64_t now = now_us();
  pthread_mutex_lock(&lock);
  int was_complete = complete(o);
  for (size_t i = 0; i < c->inserted_count; i++) {
    uint32_t stream, seq;
    uint64_t written;
    if (item_id_decode(&c->inserted[i], &stream, &seq, &written) != 0 || stream != o->stream) {
      o->foreign++;
      continue;
    }
    if (seq >= o->seen_size && grow_seen(o, seq) != 0) {
      fprintf(stderr, "load: out of memory for an observer\n");
      abort();
    }
    if (o->seen[seq]) continue;
    o->seen[seq] = 1;
    o->delivered++;
    o->last_new_us = now;
    samples_add(SAMPLE_NOTIFY, written, now);
  }
  o->removed += c->deleted_count;
  if (!was_complete && complete(o)) pthread_cond_broadcast(&progress);
  pthread_mutex_unlock(&lock);
}

int observer_start(struct observer *o, struct device *d, uint32_t stream) {
  pthread_once(&progress_once, progress_init);
  memset(o, 0, sizeof *o);
  o->device = d;
  o->stream = stream;
  if (ferry_db_observe_query(&o->token, d->db, d->keys.item, "TRUEPREDICATE", NULL, 0, on_items, o, NULL) != FERRY_OK) {
    fprintf(stderr, "load: observe %s: %s\n", d->subject, ferry_error_last()->message);
    return -1;
  }
  return 0;
}

void observer_stop(struct observer *o) {
  ferry_notification_token_free(o->token);
  o->token = NULL;
  free(o->seen);
  o->seen = NULL, o->seen_size = 0;
}

void observers_expect(struct observer **observers, size_t n, const uint64_t *expected) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < n; i++) observers[i]->expected = expected[i], observers[i]->expecting = 1;
  pthread_mutex_unlock(&lock);
}

size_t observers_wait(struct observer **observers, size_t n, uint64_t deadline_us) {
  pthread_once(&progress_once, progress_init);
  struct timespec deadline = timespec_of_us(deadline_us);
  size_t short_ = 0;
  pthread_mutex_lock(&lock);
  for (;;) {
    short_ = 0;
    for (size_t i = 0; i < n; i++) short_ += !complete(observers[i]);
    if (short_ == 0 || pthread_cond_timedwait(&progress, &lock, &deadline) == ETIMEDOUT) break;
  }
  if (short_) { /* the deadline passed: count once more, a delivery may have just come in */
    short_ = 0;
    for (size_t i = 0; i < n; i++) short_ += !complete(observers[i]);
  }
  pthread_mutex_unlock(&lock);
  return short_;
}

struct observer_totals observers_totals(struct observer **observers, size_t n) {
  struct observer_totals t = {0};
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < n; i++) {
    const struct observer *o = observers[i];
    t.delivered += o->delivered, t.expected += o->expected, t.foreign += o->foreign, t.removed += o->removed;
    t.complete += complete(o);
    if (o->last_new_us > t.last_new_us) t.last_new_us = o->last_new_us;
  }
  pthread_mutex_unlock(&lock);
  return t;
}
