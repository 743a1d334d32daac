/*
 * loopback.c — the physical baseline for the sync benchmarks: TCP over 127.0.0.1 with
 * TCP_NODELAY, between two threads of one process.
 *
 *   loopback rtt N        N round trips of a 64-byte message: p50 / p99 in ms
 *   loopback throughput M M MiB sent one way in 64 KiB writes: MiB/s
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int listener(int *port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 1)) { perror("listen"); exit(1); }
  socklen_t len = sizeof a;
  getsockname(s, (struct sockaddr *)&a, &len);
  *port = ntohs(a.sin_port);
  return s;
}

static void nodelay(int s) {
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int dial(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("connect"); exit(1); }
  nodelay(s);
  return s;
}

static int full(int s, char *buf, size_t n, int writing) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = writing ? write(s, buf + done, n - done) : read(s, buf + done, n - done);
    if (r <= 0) return -1;
    done += (size_t)r;
  }
  return 0;
}

struct peer { int listen_fd; long count; int mode; };

static void *serve(void *arg) {
  struct peer *p = arg;
  int c = accept(p->listen_fd, NULL, NULL);
  nodelay(c);
  static char buf[65536];
  if (p->mode == 0) {
    for (long i = 0; i < p->count; i++) {
      if (full(c, buf, 64, 0) || full(c, buf, 64, 1)) break;
    }
  } else {
    while (read(c, buf, sizeof buf) > 0) {}
  }
  close(c);
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: loopback rtt N | throughput MiB\n"); return 2; }
  long n = atol(argv[2]);
  int port;
  struct peer p = {.listen_fd = listener(&port), .count = n, .mode = strcmp(argv[1], "rtt") == 0 ? 0 : 1};
  pthread_t t;
  pthread_create(&t, NULL, serve, &p);
  int s = dial(port);
  if (p.mode == 0) {
    double *lat = calloc((size_t)n, sizeof *lat);
    char msg[64] = {0};
    for (long i = 0; i < n; i++) {
      double t0 = now();
      if (full(s, msg, 64, 1) || full(s, msg, 64, 0)) { fprintf(stderr, "loopback: short transfer\n"); return 1; }
      lat[i] = now() - t0;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    printf("loopback: %ld round trips of 64 bytes (TCP_NODELAY): p50 %.3f ms, p99 %.3f ms\n", n, lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3);
    free(lat);
  } else {
    static char buf[65536];
    double t0 = now();
    for (long i = 0; i < n * 16; i++)
      if (full(s, buf, sizeof buf, 1)) { fprintf(stderr, "loopback: short write\n"); return 1; }
    shutdown(s, SHUT_WR);
    double t1 = now();
    printf("loopback: %ld MiB one way in 64 KiB writes: %.0f MiB/s\n", n, n / (t1 - t0));
  }
  close(s);
  pthread_join(t, NULL);
  return 0;
}
