/*
 * clock.h — one clock for every process of a load run.
 *
 * CLOCK_MONOTONIC is the same clock in every process of a machine, so a time taken by a
 * writer in one worker and a time taken by an observer in another (or by the bootstrap
 * worker) compare directly: the load tool's timestamps are microseconds of it.
 */
#ifndef LOAD_CLOCK_H
#define LOAD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static inline struct timespec timespec_of_us(uint64_t us) {
  struct timespec t = {.tv_sec = (time_t)(us / 1000000u), .tv_nsec = (long)(us % 1000000u) * 1000};
  return t;
}

#endif
