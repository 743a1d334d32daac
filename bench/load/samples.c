/* samples.c — see samples.h. One growing array behind a mutex: appends are rare enough
 * (tens of thousands a second at most) for the lock never to matter. */
#define _GNU_SOURCE 1 /* POSIX clocks and threads under -std=c11 */
#include "samples.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sample *records;
static size_t count, capacity;

void samples_add(enum sample_kind kind, uint64_t start_us, uint64_t end_us) {
  uint64_t d = end_us > start_us ? end_us - start_us : 0;
  struct sample s = {.start_us = start_us, .duration_us = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d, .kind = kind};
  pthread_mutex_lock(&lock);
  if (count == capacity) {
    size_t grown = capacity ? capacity * 2 : 65536;
    struct sample *r = realloc(records, grown * sizeof *r);
    if (!r) {
      pthread_mutex_unlock(&lock);
      fprintf(stderr, "load: out of memory for samples\n");
      abort();
    }
    records = r, capacity = grown;
  }
  records[count++] = s;
  pthread_mutex_unlock(&lock);
}

long samples_write(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  pthread_mutex_lock(&lock);
  size_t n = count, written = count ? fwrite(records, sizeof *records, count, f) : 0;
  pthread_mutex_unlock(&lock);
  if (fclose(f) != 0 || written != n) return -1;
  return (long)n;
}
