/*
 * stats.c — merges the workers' sample files (samples.h) and prints their percentiles.
 *
 *   stats summary KIND [--from US] [--to US] [--prefix P] FILE...
 *       one line `Pcount=N Pp50_ms=.. Pp99_ms=.. Pmax_ms=.. Pmean_ms=..` over the samples of
 *       KIND (notify, commit, ack, connect, login, lag) whose start lies in [from, to)
 *   stats per-second T0_US FILE...
 *       a table, one row per second of the writes' start since T0_US: writes committed,
 *       how many of them observers were notified of (one per observer), and p50/p99/max of
 *       their write-to-notification latency, and the generator's worst lateness (lag)
 *
 * Percentiles as bench/sync.c takes them: of n sorted values, p50 is the (n/2)th (from 0) and
 * p99 the (n*99/100)th.
 */
#define _GNU_SOURCE 1
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "samples.h"

static const char *kinds[] = {"notify", "commit", "ack", "connect", "login", "lag"};

static struct sample *all;
static size_t count;

static void load(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  size_t n = (size_t)size / sizeof(struct sample);
  all = realloc(all, (count + n) * sizeof *all);
  if (n && fread(all + count, sizeof *all, n, f) != n) {
    fprintf(stderr, "stats: short read of %s\n", path);
    exit(1);
  }
  count += n;
  fclose(f);
}

static int by_duration(const void *a, const void *b) {
  uint32_t x = ((const struct sample *)a)->duration_us, y = ((const struct sample *)b)->duration_us;
  return x < y ? -1 : x > y;
}

static int kind_of(const char *name) {
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
    if (strcmp(name, kinds[k]) == 0) return (int)k;
  fprintf(stderr, "stats: unknown kind %s\n", name);
  exit(2);
}

/* Samples of kind with start in [from, to), sorted by duration, into a new array. */
static struct sample *select_sorted(int kind, uint64_t from, uint64_t to, size_t *n) {
  struct sample *s = malloc((count ? count : 1) * sizeof *s);
  *n = 0;
  for (size_t i = 0; i < count; i++)
    if ((int)all[i].kind == kind && all[i].start_us >= from && all[i].start_us < to) s[(*n)++] = all[i];
  qsort(s, *n, sizeof *s, by_duration);
  return s;
}

static double ms(uint32_t us) { return us / 1000.0; }

static void summary(int kind, uint64_t from, uint64_t to, const char *prefix) {
  size_t n;
  struct sample *s = select_sorted(kind, from, to, &n);
  if (n == 0) {
    printf("%scount=0 %sp50_ms=n/a %sp99_ms=n/a %smax_ms=n/a %smean_ms=n/a\n", prefix, prefix, prefix, prefix, prefix);
  } else {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += s[i].duration_us;
    printf("%scount=%zu %sp50_ms=%.2f %sp99_ms=%.2f %smax_ms=%.2f %smean_ms=%.2f\n", prefix, n, prefix, ms(s[n / 2].duration_us),
           prefix, ms(s[n * 99 / 100].duration_us), prefix, ms(s[n - 1].duration_us), prefix, sum / n / 1000.0);
  }
  free(s);
}

static void per_second(uint64_t t0) {
  uint64_t last = t0;
  for (size_t i = 0; i < count; i++)
    if (all[i].start_us > last) last = all[i].start_us;
  size_t seconds = (size_t)((last - t0) / 1000000u) + 1;
  printf("%6s %9s %10s %9s %9s %9s %9s\n", "second", "written", "delivered", "p50_ms", "p99_ms", "max_ms", "lag_max_ms");
  for (size_t sec = 0; sec < seconds; sec++) {
    uint64_t from = t0 + sec * 1000000u, to = from + 1000000u;
    size_t written, delivered, lags;
    struct sample *w = select_sorted(SAMPLE_COMMIT, from, to, &written);
    struct sample *d = select_sorted(SAMPLE_NOTIFY, from, to, &delivered);
    struct sample *l = select_sorted(SAMPLE_LAG, from, to, &lags);
    if (written || delivered) {
      printf("%6zu %9zu %10zu ", sec, written, delivered);
      if (delivered)
        printf("%9.2f %9.2f %9.2f ", ms(d[delivered / 2].duration_us), ms(d[delivered * 99 / 100].duration_us), ms(d[delivered - 1].duration_us));
      else
        printf("%9s %9s %9s ", "-", "-", "-");
      if (lags) printf("%9.2f\n", ms(l[lags - 1].duration_us));
      else printf("%9s\n", "-");
    }
    free(w), free(d), free(l);
  }
}

static void usage(void) {
  fprintf(stderr, "usage: stats summary KIND [--from US] [--to US] [--prefix P] FILE... | stats per-second T0_US FILE...\n");
  exit(2);
}

int main(int argc, char **argv) {
  if (argc < 3) usage();
  if (strcmp(argv[1], "summary") == 0) {
    int kind = kind_of(argv[2]);
    uint64_t from = 0, to = UINT64_MAX;
    const char *prefix = "";
    int i = 3;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
      if (strcmp(argv[i], "--from") == 0) from = strtoull(argv[i + 1], NULL, 10);
      else if (strcmp(argv[i], "--to") == 0) to = strtoull(argv[i + 1], NULL, 10);
      else if (strcmp(argv[i], "--prefix") == 0) prefix = argv[i + 1];
      else usage();
    }
    for (; i < argc; i++) load(argv[i]);
    summary(kind, from, to, prefix);
  } else if (strcmp(argv[1], "per-second") == 0) {
    uint64_t t0 = strtoull(argv[2], NULL, 10);
    for (int i = 3; i < argc; i++) load(argv[i]);
    per_second(t0);
  } else {
    usage();
  }
  return 0;
}
