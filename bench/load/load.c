/*
 * load.c — one worker process of the load tool (bench/load/run starts several of them).
 *
 *   load idle             --url URL --dir DIR --first I --count N
 *   load pairs            --url URL [--observer-url URL] --dir DIR --first I --count N [--rate R] [--threads T]
 *   load fanout-writer    --url URL --dir DIR --rows N [--batch B]
 *   load fanout-observers --url URL --dir DIR --first I --count M --rows N
 *   load bootstrap        --url URL [--observer-url URL] --dir DIR --rows N --baseline S
 *
 * Every role connects its devices (device.h), prints `READY ...` and waits for the driver's
 * SIGUSR1 (control.h); what follows is per role, below. At the end a worker prints one
 * `WORKER role=... key=value ...` line (times are CLOCK_MONOTONIC microseconds, comparable
 * between the workers) and writes its timings to --samples (samples.h) for `stats`.
 *
 * Users: device i of a role is the user `<role prefix>-<i>` (idle-7, pair-7); a pair's
 * writer and observer are two devices of one user, with their own logins, files and
 * connections; the fan-out's devices are all the user `fanout`, the bootstrap's `boot`.
 * Logins use a custom JWT by default (jwt.h); --auth password registers and logs in with
 * email/password instead.
 */
#define _GNU_SOURCE 1
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "clock.h"
#include "control.h"
#include "device.h"
#include "observer.h"
#include "samples.h"
#include "verify.h"
#include "writer.h"

struct options {
  const char *role, *url, *observer_url, *dir, *samples;
  long first, count, rows;
  double rate;    /* pairs: transactions per second per writer; 0: as fast as possible */
  long batch;     /* items per transaction */
  int threads;    /* writer threads; 0: 8 at a rate, one per writer as fast as possible */
  int parallel;   /* devices connecting at once */
  double baseline, timeout, max_wait, connect_timeout;
};

_Noreturn static void usage(void) {
  fprintf(stderr,
          "usage: load idle|pairs|fanout-writer|fanout-observers|bootstrap --url URL --dir DIR [options]\n"
          "  --observer-url URL   observers (and the bootstrap's fresh device) connect here (default --url)\n"
          "  --first I --count N  this worker's devices or pairs: I .. I+N-1\n"
          "  --rate R             pairs: transactions per second per writer, 0 = as fast as possible (default 1)\n"
          "  --batch B            items per transaction (default 1; fan-out 1000; bootstrap preload 10000)\n"
          "  --rows N             fan-out: items the writer writes; bootstrap: items preloaded\n"
          "  --baseline S         bootstrap: seconds after the start before the bootstrap begins (default 10)\n"
          "  --threads T          writer threads (default 8 at a rate, one per writer as fast as possible)\n"
          "  --parallel P         devices logging in at once (default 16)\n"
          "  --timeout S          drain / completion deadline (default 120)\n"
          "  --connect-timeout S  deadline for every device to be connected (default 600)\n"
          "  --max-wait S         longest wait for the driver's next signal (default 3600)\n"
          "  --samples FILE       where to write the timings (samples.h)\n"
          "  --auth jwt|password  how devices log in (default jwt; key: --jwt-key or $jwtSigningKey)\n");
  exit(2);
}

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static long peak_rss_kb(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

static uint64_t seconds_us(double s) { return (uint64_t)(s * 1e6); }

_Noreturn static void die(const char *what) {
  fprintf(stderr, "load: %s\n", what);
  exit(1);
}

/* The worker's file for device i under dir/sub. */
static struct device *new_device(ferry_app_t *app, const char *dir, const char *sub, const char *subject, long i) {
  struct device *d = calloc(1, sizeof *d);
  char path[512];
  snprintf(path, sizeof path, "%s/%s/d%ld.ferry", dir, sub, i);
  device_init(d, app, subject, path);
  return d;
}

static ferry_app_t *app_in(const struct options *o, const char *url, const char *sub) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s", o->dir, sub);
  ferry_app_t *app = load_app_new(url, dir);
  if (!app) die("cannot create an App");
  return app;
}

static void connect_all(const struct options *o, struct device **devices, size_t n, const char *what) {
  long bad = devices_connect(devices, n, o->parallel, now_us() + seconds_us(o->connect_timeout));
  if (bad) {
    fprintf(stderr, "load: %ld of %zu %s devices did not connect\n", bad, n, what);
    exit(1);
  }
}

static void wait_signal(const struct options *o, const char *phase) {
  if (control_wait(now_us() + seconds_us(o->max_wait)) != 0) {
    fprintf(stderr, "load: no signal to %s within %.0f s\n", phase, o->max_wait);
    exit(1);
  }
}

static void finish(const struct options *o) {
  if (o->samples && samples_write(o->samples) < 0) {
    perror(o->samples);
    exit(1);
  }
  fflush(stdout);
}

static void print_common(void) {
  printf(" sync_errors=%ld transient_errors=%ld compensating_writes=%ld sigpipes=%ld cpu_s=%.2f peak_rss_kb=%ld\n",
         sync_errors_seen(), transient_errors_seen(), compensating_writes_seen(), control_sigpipes(), cpu_seconds(), peak_rss_kb());
}

/* ---- idle: connect, stay connected until told, disconnect -------------------------------- */

static int run_idle(const struct options *o) {
  ferry_app_t *app = app_in(o, o->url, "idle");
  size_t n = (size_t)o->count;
  struct device **devices = calloc(n, sizeof *devices);
  char subject[48];
  for (size_t i = 0; i < n; i++) {
    snprintf(subject, sizeof subject, "idle-%ld", o->first + (long)i);
    devices[i] = new_device(app, o->dir, "idle", subject, o->first + (long)i);
  }
  uint64_t t0 = now_us();
  connect_all(o, devices, n, "idle");
  uint64_t t1 = now_us();
  printf("READY role=idle devices=%zu connect_start_us=%" PRIu64 " connect_end_us=%" PRIu64 "\n", n, t0, t1);
  fflush(stdout);
  wait_signal(o, "disconnect");
  uint64_t t2 = now_us();
  for (size_t i = 0; i < n; i++) device_close(devices[i]);
  uint64_t t3 = now_us();
  printf("WORKER role=idle devices=%zu connect_start_us=%" PRIu64 " connect_end_us=%" PRIu64 " disconnect_s=%.3f", n, t0, t1,
         (double)(t3 - t2) / 1e6);
  print_common();
  finish(o);
  ferry_app_free(app);
  return 0;
}

/* ---- pairs: a writer and an observer per user, at a rate or as fast as possible ---------- */

static int run_pairs(const struct options *o) {
  ferry_app_t *wapp = app_in(o, o->url, "writers"), *oapp = app_in(o, o->observer_url, "observers");
  size_t n = (size_t)o->count;
  struct device **devices = calloc(2 * n, sizeof *devices);
  struct writer **writers = calloc(n, sizeof *writers);
  struct observer **observers = calloc(n, sizeof *observers);
  char subject[48];
  for (size_t i = 0; i < n; i++) {
    long p = o->first + (long)i;
    snprintf(subject, sizeof subject, "pair-%ld", p);
    devices[2 * i] = new_device(wapp, o->dir, "writers", subject, p);
    devices[2 * i + 1] = new_device(oapp, o->dir, "observers", subject, p);
  }
  uint64_t t0 = now_us();
  connect_all(o, devices, 2 * n, "pair");
  uint64_t t1 = now_us();
  for (size_t i = 0; i < n; i++) {
    writers[i] = calloc(1, sizeof **writers);
    observers[i] = calloc(1, sizeof **observers);
    writer_init(writers[i], devices[2 * i], (uint32_t)(o->first + (long)i));
    if (observer_start(observers[i], devices[2 * i + 1], (uint32_t)(o->first + (long)i)) != 0) exit(1);
  }
  printf("READY role=pairs pairs=%zu connect_start_us=%" PRIu64 " connect_end_us=%" PRIu64 "\n", n, t0, t1);
  fflush(stdout);

  wait_signal(o, "start writing");
  uint64_t start = now_us();
  struct writer_plan plan = {.rate = o->rate, .batch = (uint32_t)o->batch, .limit = 0, .threads = o->threads};
  if (!plan.threads) plan.threads = o->rate > 0 ? 8 : (int)n;
  if (writers_start(writers, n, &plan, start) != 0) exit(1);
  wait_signal(o, "stop writing");
  writers_stop();
  writers_join();
  uint64_t stop = now_us();

  /* What the run delivered while writing, then the drain: every observer must get every
   * write its writer committed, within --timeout. */
  uint64_t written = 0, acked_at_stop = 0;
  uint64_t *expected = calloc(n, sizeof *expected);
  for (size_t i = 0; i < n; i++) {
    expected[i] = atomic_load(&writers[i]->committed);
    written += expected[i];
    acked_at_stop += atomic_load(&writers[i]->acked);
  }
  struct observer_totals at_stop = observers_totals(observers, n);
  observers_expect(observers, n, expected);
  size_t short_ = observers_wait(observers, n, stop + seconds_us(o->timeout));
  struct observer_totals drained = observers_totals(observers, n);
  uint64_t unacked = writers_wait_acked(writers, n, now_us() + seconds_us(short_ ? 1 : o->timeout));
  uint64_t acked = 0;
  for (size_t i = 0; i < n; i++) acked += atomic_load(&writers[i]->acked);

  struct verdict sum = {0};
  for (size_t i = 0; i < n; i++) {
    struct verdict v;
    if (verify_items(&v, observers[i]->device, observers[i]->stream, expected[i]) != 0) exit(1);
    sum.expected += v.expected, sum.found += v.found, sum.lost += v.lost, sum.wrong += v.wrong, sum.extra += v.extra;
    if ((v.lost || v.wrong || v.extra) && sum.lost + sum.wrong + sum.extra == v.lost + v.wrong + v.extra)
      fprintf(stderr, "load: observer of %s: %" PRIu64 " committed, %" PRIu64 " lost, %" PRIu64 " wrong, %" PRIu64 " extra\n",
              observers[i]->device->subject, v.expected, v.lost, v.wrong, v.extra);
  }
  int failed_writers = 0;
  for (size_t i = 0; i < n; i++) failed_writers += writers[i]->failed;

  printf("WORKER role=pairs pairs=%zu connect_start_us=%" PRIu64 " connect_end_us=%" PRIu64 " start_us=%" PRIu64
         " stop_us=%" PRIu64 " written=%" PRIu64 " delivered_at_stop=%" PRIu64 " acked_at_stop=%" PRIu64 " delivered=%" PRIu64
         " acked=%" PRIu64 " unacked=%" PRIu64 " observers_short=%zu last_delivery_us=%" PRIu64 " found=%" PRIu64
         " lost=%" PRIu64 " wrong=%" PRIu64 " extra=%" PRIu64 " foreign=%" PRIu64 " removed=%" PRIu64 " failed_writers=%d",
         n, t0, t1, start, stop, written, at_stop.delivered, acked_at_stop, drained.delivered, acked, unacked, short_,
         drained.last_new_us, sum.found, sum.lost, sum.wrong, sum.extra, drained.foreign, drained.removed, failed_writers);
  print_common();
  finish(o);
  for (size_t i = 0; i < n; i++) observer_stop(observers[i]);
  for (size_t i = 0; i < 2 * n; i++) device_close(devices[i]);
  ferry_app_free(wapp);
  ferry_app_free(oapp);
  return 0;
}

/* ---- fan-out: one writer, many observers of the same user (in other workers) ------------- */

static int run_fanout_writer(const struct options *o) {
  ferry_app_t *app = app_in(o, o->url, "writer");
  struct device *d = new_device(app, o->dir, "writer", "fanout", 0);
  connect_all(o, &d, 1, "fan-out writer");
  struct writer w, *wp = &w;
  writer_init(&w, d, 0);
  printf("READY role=fanout-writer\n");
  fflush(stdout);
  wait_signal(o, "start writing");
  uint64_t start = now_us();
  struct writer_plan plan = {.rate = 0, .batch = (uint32_t)o->batch, .limit = (uint64_t)o->rows, .threads = 1};
  if (writers_start(&wp, 1, &plan, start) != 0) exit(1);
  writers_join();
  uint64_t written = now_us();
  uint64_t unacked = writers_wait_acked(&wp, 1, written + seconds_us(o->timeout));
  uint64_t acked = now_us();
  printf("WORKER role=fanout-writer rows=%" PRIu64 " start_us=%" PRIu64 " written_us=%" PRIu64 " acked_us=%" PRIu64
         " unacked=%" PRIu64 " failed_writers=%d",
         (uint64_t)atomic_load(&w.committed), start, written, acked, unacked, w.failed);
  print_common();
  finish(o);
  device_close(d);
  ferry_app_free(app);
  return 0;
}

static int run_fanout_observers(const struct options *o) {
  ferry_app_t *app = app_in(o, o->url, "observers");
  size_t n = (size_t)o->count;
  struct device **devices = calloc(n, sizeof *devices);
  struct observer **observers = calloc(n, sizeof *observers);
  uint64_t *expected = calloc(n, sizeof *expected);
  for (size_t i = 0; i < n; i++) devices[i] = new_device(app, o->dir, "observers", "fanout", o->first + (long)i);
  connect_all(o, devices, n, "fan-out observer");
  for (size_t i = 0; i < n; i++) {
    observers[i] = calloc(1, sizeof **observers);
    if (observer_start(observers[i], devices[i], 0) != 0) exit(1);
    expected[i] = (uint64_t)o->rows;
  }
  observers_expect(observers, n, expected);
  printf("READY role=fanout-observers observers=%zu\n", n);
  fflush(stdout);
  wait_signal(o, "start");
  uint64_t start = now_us();
  size_t short_ = observers_wait(observers, n, start + seconds_us(o->timeout));
  struct observer_totals t = observers_totals(observers, n);
  struct verdict sum = {0};
  for (size_t i = 0; i < n; i++) {
    struct verdict v;
    if (verify_items(&v, devices[i], 0, (uint64_t)o->rows) != 0) exit(1);
    sum.found += v.found, sum.lost += v.lost, sum.wrong += v.wrong, sum.extra += v.extra;
  }
  printf("WORKER role=fanout-observers observers=%zu delivered=%" PRIu64 " observers_short=%zu last_delivery_us=%" PRIu64
         " found=%" PRIu64 " lost=%" PRIu64 " wrong=%" PRIu64 " extra=%" PRIu64 " foreign=%" PRIu64 " removed=%" PRIu64,
         n, t.delivered, short_, t.last_new_us, sum.found, sum.lost, sum.wrong, sum.extra, t.foreign, t.removed);
  print_common();
  finish(o);
  for (size_t i = 0; i < n; i++) observer_stop(observers[i]);
  for (size_t i = 0; i < n; i++) device_close(devices[i]);
  ferry_app_free(app);
  return 0;
}

/* ---- bootstrap: a fresh device downloads --rows Items while the pairs write --------------- */

static int run_bootstrap(const struct options *o) {
  /* The data first, through a loader device, before READY: only the download is measured. */
  ferry_app_t *lapp = app_in(o, o->url, "loader"), *fapp = app_in(o, o->observer_url, "fresh");
  struct device *loader = new_device(lapp, o->dir, "loader", "boot", 0);
  connect_all(o, &loader, 1, "bootstrap loader");
  struct writer w, *wp = &w;
  writer_init(&w, loader, 0);
  uint64_t p0 = now_us();
  struct writer_plan plan = {.rate = 0, .batch = (uint32_t)o->batch, .limit = (uint64_t)o->rows, .threads = 1};
  if (writers_start(&wp, 1, &plan, p0) != 0) exit(1);
  writers_join();
  if (w.failed || writers_wait_acked(&wp, 1, now_us() + seconds_us(o->timeout)) != 0) die("the preload was not acknowledged");
  uint64_t p1 = now_us();

  struct device *fresh = new_device(fapp, o->dir, "fresh", "boot", 0);
  if (device_log_in(fresh) != 0 || device_open(fresh) != 0) exit(1);
  printf("READY role=bootstrap rows=%ld preload_s=%.3f\n", o->rows, (double)(p1 - p0) / 1e6);
  fflush(stdout);
  wait_signal(o, "start");
  struct timespec at = timespec_of_us(now_us() + seconds_us(o->baseline));
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {
  }
  struct latch done;
  latch_init(&done, 1);
  uint64_t b0 = now_us();
  if (device_subscribe(fresh, &done) != 0) exit(1);
  if (latch_wait(&done, b0 + seconds_us(o->timeout)) != 0) die("the bootstrap did not complete in time");
  if (done.failed) die(done.first_error);
  uint64_t b1 = fresh->subscribed_us;
  long peak = peak_rss_kb(); /* before the check below, which reads every row */
  struct verdict v;
  if (verify_items(&v, fresh, 0, (uint64_t)o->rows) != 0) exit(1);
  printf("WORKER role=bootstrap rows=%ld preload_s=%.3f bootstrap_start_us=%" PRIu64 " bootstrap_end_us=%" PRIu64
         " bootstrap_s=%.3f bootstrap_peak_rss_kb=%ld found=%" PRIu64 " lost=%" PRIu64 " wrong=%" PRIu64 " extra=%" PRIu64,
         o->rows, (double)(p1 - p0) / 1e6, b0, b1, (double)(b1 - b0) / 1e6, peak, v.found, v.lost, v.wrong, v.extra);
  print_common();
  finish(o);
  device_close(fresh);
  device_close(loader);
  ferry_app_free(fapp);
  ferry_app_free(lapp);
  return 0;
}

int main(int argc, char **argv) {
  control_init();
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2 || argv[1][0] == '-') usage();
  struct options o = {.role = argv[1], .rate = 1, .batch = 0, .parallel = 16, .baseline = 10, .timeout = 120,
                      .max_wait = 3600, .connect_timeout = 600};
  const char *auth = "jwt", *jwt_key = getenv("jwtSigningKey");
  static const struct option long_options[] = {
      {"url", required_argument, 0, 'u'},      {"observer-url", required_argument, 0, 'U'}, {"dir", required_argument, 0, 'd'},
      {"first", required_argument, 0, 'f'},    {"count", required_argument, 0, 'n'},        {"rows", required_argument, 0, 'r'},
      {"rate", required_argument, 0, 'R'},     {"batch", required_argument, 0, 'b'},        {"threads", required_argument, 0, 't'},
      {"parallel", required_argument, 0, 'p'}, {"baseline", required_argument, 0, 'B'},     {"timeout", required_argument, 0, 'T'},
      {"max-wait", required_argument, 0, 'M'}, {"connect-timeout", required_argument, 0, 'C'},
      {"samples", required_argument, 0, 's'},  {"auth", required_argument, 0, 'a'},         {"jwt-key", required_argument, 0, 'k'},
      {0, 0, 0, 0}};
  optind = 2;
  for (int c; (c = getopt_long(argc, argv, "", long_options, NULL)) != -1;) {
    switch (c) {
      case 'u': o.url = optarg; break;
      case 'U': o.observer_url = optarg; break;
      case 'd': o.dir = optarg; break;
      case 'f': o.first = atol(optarg); break;
      case 'n': o.count = atol(optarg); break;
      case 'r': o.rows = atol(optarg); break;
      case 'R': o.rate = atof(optarg); break;
      case 'b': o.batch = atol(optarg); break;
      case 't': o.threads = atoi(optarg); break;
      case 'p': o.parallel = atoi(optarg); break;
      case 'B': o.baseline = atof(optarg); break;
      case 'T': o.timeout = atof(optarg); break;
      case 'M': o.max_wait = atof(optarg); break;
      case 'C': o.connect_timeout = atof(optarg); break;
      case 's': o.samples = optarg; break;
      case 'a': auth = optarg; break;
      case 'k': jwt_key = optarg; break;
      default: usage();
    }
  }
  if (!o.url || !o.dir || optind != argc) usage();
  if (!o.observer_url) o.observer_url = o.url;
  if (strcmp(auth, "password") == 0) device_auth.password = 1;
  else if (strcmp(auth, "jwt") != 0) usage();
  else if (!jwt_key) die("--auth jwt needs the app's signing key: --jwt-key KEY or $jwtSigningKey");
  device_auth.jwt_key = jwt_key;
  device_auth.audience = "item-app";
  if (o.first < 0 || o.count < 0 || o.first + o.count > (long)ITEM_MAX_STREAM || o.rows < 0 || o.rows > (long)ITEM_MAX_SEQ) usage();

  if (strcmp(o.role, "idle") == 0) return run_idle(&o);
  if (strcmp(o.role, "pairs") == 0) {
    if (!o.batch) o.batch = 1;
    return run_pairs(&o);
  }
  if (strcmp(o.role, "fanout-writer") == 0) {
    if (!o.batch) o.batch = 1000;
    return run_fanout_writer(&o);
  }
  if (strcmp(o.role, "fanout-observers") == 0) return run_fanout_observers(&o);
  if (strcmp(o.role, "bootstrap") == 0) {
    if (!o.batch) o.batch = 10000;
    return run_bootstrap(&o);
  }
  usage();
}
