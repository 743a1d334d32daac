/*
 * observer.h — what each observing device received, as its notifications said.
 *
 * An observer watches its database's Items (ferry_db_observe_query on every Item). Each
 * notification names the inserted objects' primary keys; item.h's ids say which writer's
 * stream and which write each one is and when it was written, so the observer records the
 * write-to-notification latency of every write the first time it sees it (SAMPLE_NOTIFY),
 * counts distinct writes, and notes when its last new write arrived (the drain's end).
 */
#ifndef LOAD_OBSERVER_H
#define LOAD_OBSERVER_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

struct observer {
  struct device *device;
  uint32_t stream;        /* the writer whose items it expects */
  /* Behind the observers' lock (observer.c): */
  uint8_t *seen;          /* one byte per seq: seen already */
  size_t seen_size;
  uint64_t delivered;     /* distinct writes of its stream seen */
  int expecting;          /* whether expected is known yet (observers_expect) */
  uint64_t expected;      /* how many writes its writer committed */
  uint64_t last_new_us;   /* when the latest distinct write arrived */
  uint64_t foreign;       /* inserted objects that are not its stream's writes */
  uint64_t removed;       /* objects deleted under it (a server revert would do that) */
  ferry_notification_token_t *token;
};

/* Starts observing; 0 or -1 (printed). */
int observer_start(struct observer *o, struct device *d, uint32_t stream);
void observer_stop(struct observer *o);

/* Sets each observer's expected count (expected[i] for observers[i]). */
void observers_expect(struct observer **observers, size_t n, const uint64_t *expected);
/* Waits until every observer has delivered its expected count, or deadline_us. Returns the
 * number of observers still short. */
size_t observers_wait(struct observer **observers, size_t n, uint64_t deadline_us);

struct observer_totals {
  uint64_t delivered, expected, foreign, removed, complete, last_new_us;
};
struct observer_totals observers_totals(struct observer **observers, size_t n);

#endif
