/*
 * ferry-fault-proxy: a TCP proxy that puts network faults between a Ferry sync client and
 * ferry-server, on cue, for tests.
 *
 * Why it exists: the sync engine must survive slow links, dead-but-open connections, refused
 * connections and resets. Real networks do that rarely and never when a test wants it. The
 * proxy sits between the client and ferry-server (WebSocket over TCP on 127.0.0.1) and, when
 * told, delays, swallows, refuses or resets the traffic.
 *
 * How tests use it (Swift, C and Python alike):
 *   ferry-fault-proxy --target 127.0.0.1:SERVER_PORT --port-file P --control-port-file C
 * then wait for file P (written after C), point the sync client at 127.0.0.1:<port in P>,
 * connect a TCP socket to 127.0.0.1:<port in C> and send one-line commands ("delay 200",
 * "blackhole", "reset", "pass", "stats", ...). Each command gets one reply line, "ok..." or
 * "error <why>". README.md in this directory has the whole protocol.
 *
 * Given several --target options (the nodes of a cluster sharing one database), the proxy is
 * also a round-robin load balancer that the test steers: "target-down N" takes node N out and
 * resets its connections as a crashed node would, "target-up N" puts it back, "target N
 * ADDR:PORT" re-points it at a restarted node.
 *
 * Design: one thread, one poll() loop, non-blocking sockets, libc only. A proxied connection
 * has two directions; each is a FIFO of chunks stamped with the time they may be forwarded,
 * bounded to DIR_BUF_MAX bytes: when it is full the proxy stops reading the source side
 * (backpressure). Faults never drop bytes from the middle of a live stream (that would corrupt
 * the framing silently) except in a blackhole, which is meant to be a dead connection; every
 * other fault closes or resets the connection.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, ppoll, SOCK_NONBLOCK */
#endif

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef DIR_BUF_MAX
#define DIR_BUF_MAX (256 * 1024) /* bytes queued per direction before reading stops */
#endif
#define READ_MAX (64 * 1024)           /* bytes read from a socket at once: one chunk */
#define CTL_LINE_MAX 1024              /* longest control line, without its newline */
#define CTL_READ_MAX 512               /* control bytes read at once */
#define CTL_OUT_MAX (64 * 1024)        /* unsent control replies */
#define CTL_OUT_READ_LIMIT (16 * 1024) /* stop reading commands while this much is unsent */
#define DELAY_LIMIT_MS 3600000u        /* one hour: larger delays are refused as malformed */
#define ACCEPT_BATCH 64                /* connections accepted per loop round */
#define ACCEPT_PAUSE_MS 100            /* pause accepting when out of file descriptors */
#define CTL_REPLY_MAX 4096             /* longest reply line: `targets` with every target */
#define MAX_TARGETS 16                 /* --target options; bounds the `targets` reply */

enum { CLIENT = 0, TARGET = 1 };

/* Bytes read in one go from one side, waiting until due_ms to be written to the other. */
struct chunk {
  struct chunk *next;
  uint64_t due_ms;
  size_t len, off; /* off: bytes already written */
  char data[];
};

/* One direction of a connection: bytes read from fd[s] waiting to be written to fd[!s]. */
struct dir {
  struct chunk *head, *tail;
  size_t queued; /* unwritten bytes in the chunks */
  bool eof;      /* the source side sent EOF */
  bool shut;     /* the EOF was passed on: shutdown(SHUT_WR) on the destination */
};

struct conn {
  struct conn *next;
  int fd[2];         /* fd[CLIENT]: accepted socket, fd[TARGET]: socket to the target */
  unsigned target;   /* index in targets[] of the node this connection was routed to */
  struct dir dir[2]; /* dir[s]: bytes read from fd[s] */
  int pidx[2];       /* index of fd[s] in this round's pollfd array, -1 if not polled */
  bool connecting;   /* connect() to the target still in progress */
  bool blackhole;    /* chaos made this one connection a blackhole */
  bool swallowed;    /* a blackhole dropped bytes of this stream: it can never resume */
  bool dead;         /* closed; freed at the end of the round */
};

/* The faults in force. Commands combine; `pass` clears them all. */
static struct {
  unsigned delay_ms;
  bool blackhole, refuse, chaos;
  unsigned drop_pm, reset_pm, delay_max_ms, blackhole_pm; /* chaos */
} faults;

static struct {
  unsigned long long accepted, reset, refused;
  unsigned long active;
} stats;

/* A server behind the proxy. The slot index is the node's identity for the test: a new
 * address (a node restarted on another port) keeps the slot, its state and its connections. */
struct target {
  struct sockaddr_storage addr;
  socklen_t addr_len;
  char name[INET6_ADDRSTRLEN + sizeof "[]:65535"]; /* numeric ADDR:PORT, for `targets` */
  bool down;                                        /* skipped by new connections */
  unsigned long open;                               /* connections routed here, still open */
  unsigned long long routed;                        /* connections routed here in total */
};

static struct target targets[MAX_TARGETS];
static unsigned target_count;
static unsigned next_target; /* where the round-robin search for a live target starts */

/* The control connection (one at a time). */
static struct {
  int fd;
  char in[CTL_LINE_MAX];
  size_t in_len;
  char pending[CTL_READ_MAX]; /* bytes read but not yet parsed: the replies had no room */
  size_t pending_off, pending_len;
  bool discarding; /* inside a line that was too long */
  bool closing;    /* peer sent EOF: flush the replies, then close */
  char out[CTL_OUT_MAX];
  size_t out_len;
} ctl = {.fd = -1};

static int listen_fd = -1, ctl_listen_fd = -1;
static struct conn *conns;
static uint64_t accept_paused_until;
static uint64_t rng_state;
static bool quit_requested;
static volatile sig_atomic_t stop_signal;
static int64_t wait_ms; /* poll timeout being computed for this round, -1: none */
static char scratch[READ_MAX];

static void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ferry-fault-proxy: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- seeded randomness (splitmix64): the same seed gives the same sequence of draws ---- */

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static bool chance(unsigned permille) { return permille > 0 && rng_next() % 1000 < permille; }

static unsigned rng_upto(unsigned max) { return (unsigned)(rng_next() % ((uint64_t)max + 1)); }

/* ---- sockets ---- */

/* Close so that the peer sees a reset (RST) rather than an orderly EOF. */
static void close_abortive(int fd) {
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static bool would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

/* A decimal number without sign, at most max. */
static bool parse_uint(const char *s, unsigned max, unsigned *out) {
  unsigned long long v = 0;
  if (!*s)
    return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return false;
    v = v * 10 + (unsigned)(*s - '0');
    if (v > max)
      return false;
  }
  *out = (unsigned)v;
  return true;
}

/* HOST:PORT into *out's address and name, HOST a name, an IPv4 address or [IPv6]; IPv4 is
 * preferred for names. A name is looked up at once (blocking): tests use numeric addresses. */
static bool resolve_target(const char *spec, struct target *out) {
  const char *colon = strrchr(spec, ':');
  char host[256];
  if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof host)
    return false;
  unsigned port_number; /* getaddrinfo takes 99999 and truncates it to 16 bits */
  if (!parse_uint(colon + 1, 65535, &port_number) || port_number == 0)
    return false;
  size_t hlen = (size_t)(colon - spec);
  memcpy(host, spec, hlen);
  host[hlen] = '\0';
  if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
    memmove(host, host + 1, hlen - 2);
    host[hlen - 2] = '\0';
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int rc = getaddrinfo(host, colon + 1, &hints, &res);
  if (rc != 0) {
    log_msg("target %s: %s", spec, gai_strerror(rc));
    return false;
  }
  const struct addrinfo *pick = res;
  for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  }
  char addr[INET6_ADDRSTRLEN], port[sizeof "65535"];
  rc = getnameinfo(pick->ai_addr, pick->ai_addrlen, addr, sizeof addr, port, sizeof port,
                   NI_NUMERICHOST | NI_NUMERICSERV);
  if (rc != 0) {
    log_msg("target %s: %s", spec, gai_strerror(rc));
    freeaddrinfo(res);
    return false;
  }
  bool v6 = pick->ai_family == AF_INET6;
  snprintf(out->name, sizeof out->name, "%s%s%s:%s", v6 ? "[" : "", addr, v6 ? "]" : "", port);
  memcpy(&out->addr, pick->ai_addr, pick->ai_addrlen);
  out->addr_len = pick->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

/* ---- proxied connections ---- */

static bool conn_blackholed(const struct conn *c) { return faults.blackhole || c->blackhole; }

static void dir_clear(struct dir *d) {
  while (d->head) {
    struct chunk *k = d->head;
    d->head = k->next;
    free(k);
  }
  d->tail = NULL;
  d->queued = 0;
}

static void conn_close(struct conn *c, bool abortive) {
  if (c->dead)
    return;
  for (int s = 0; s < 2; s++) {
    if (abortive)
      close_abortive(c->fd[s]);
    else
      close(c->fd[s]);
    c->fd[s] = -1;
    dir_clear(&c->dir[s]);
  }
  c->dead = true;
  stats.active--;
  targets[c->target].open--;
}

static void conn_reset(struct conn *c) {
  conn_close(c, true);
  stats.reset++;
}

static void conn_make_blackhole(struct conn *c) {
  c->blackhole = true;
  if (c->dir[CLIENT].head || c->dir[TARGET].head)
    c->swallowed = true;
  dir_clear(&c->dir[CLIENT]);
  dir_clear(&c->dir[TARGET]);
}

/* Whether dir[s] has a chunk that may be written now or later (ignoring its due time). */
static bool dir_can_flush(const struct conn *c, int s) {
  return !c->dead && !c->connecting && !conn_blackholed(c) && c->dir[s].head;
}

/* Write the due chunks of dir[s] to fd[!s] until the socket is full. */
static void flush_dir(struct conn *c, int s) {
  struct dir *d = &c->dir[s];
  while (dir_can_flush(c, s)) {
    struct chunk *k = d->head;
    if (k->due_ms > now_ms())
      return;
    ssize_t n = send(c->fd[!s], k->data + k->off, k->len - k->off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (!would_block(errno))
        conn_close(c, true);
      return;
    }
    k->off += (size_t)n;
    d->queued -= (size_t)n;
    if (k->off < k->len)
      return; /* the socket buffer is full */
    d->head = k->next;
    if (!d->head)
      d->tail = NULL;
    free(k);
  }
}

/* Queue bytes read from fd[s] for fd[!s], applying delay and chaos. */
static void forward_chunk(struct conn *c, int s, const char *data, size_t len) {
  unsigned extra_ms = 0;
  if (faults.chaos) {
    if (chance(faults.reset_pm)) {
      conn_reset(c);
      return;
    }
    if (chance(faults.blackhole_pm)) {
      conn_make_blackhole(c);
      return;
    }
    extra_ms = rng_upto(faults.delay_max_ms);
  }
  struct chunk *k = malloc(sizeof *k + len);
  if (!k) { /* out of memory: close rather than lose bytes silently */
    conn_close(c, true);
    return;
  }
  memcpy(k->data, data, len);
  k->len = len;
  k->off = 0;
  k->next = NULL;
  k->due_ms = now_ms() + faults.delay_ms + extra_ms; /* FIFO: a later chunk never overtakes */
  struct dir *d = &c->dir[s];
  if (d->tail)
    d->tail->next = k;
  else
    d->head = k;
  d->tail = k;
  d->queued += len;
  flush_dir(c, s);
}

static bool want_read(const struct conn *c, int s) {
  const struct dir *d = &c->dir[s];
  if (d->eof || (s == TARGET && c->connecting))
    return false;
  return conn_blackholed(c) || d->queued < DIR_BUF_MAX;
}

static void read_side(struct conn *c, int s) {
  struct dir *d = &c->dir[s];
  bool hole = conn_blackholed(c);
  size_t room = hole ? READ_MAX : DIR_BUF_MAX - d->queued;
  if (room > READ_MAX)
    room = READ_MAX;
  if (room == 0)
    return;
  ssize_t n = recv(c->fd[s], scratch, room, 0);
  if (n < 0) {
    if (!would_block(errno))
      conn_close(c, true);
    return;
  }
  if (n == 0)
    d->eof = true;
  else if (!hole) /* a blackhole swallows what it reads */
    forward_chunk(c, s, scratch, (size_t)n);
  else
    c->swallowed = true;
}

static void finish_connect(struct conn *c) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(c->fd[TARGET], SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    err = errno;
  if (err != 0) {
    log_msg("connecting to target %u (%s): %s", c->target, targets[c->target].name,
            strerror(err));
    conn_close(c, true);
    return;
  }
  c->connecting = false;
  flush_dir(c, CLIENT);
}

/* Pass on EOFs once their direction is flushed; close when both sides are done. */
static void conn_update(struct conn *c) {
  if (c->dead || c->connecting)
    return;
  bool hole = conn_blackholed(c);
  for (int s = 0; s < 2; s++) {
    struct dir *d = &c->dir[s];
    if (d->eof && !d->head && !d->shut && !hole) { /* a blackhole passes no EOF either */
      (void)shutdown(c->fd[!s], SHUT_WR);
      d->shut = true;
    }
  }
  const struct dir *a = &c->dir[CLIENT], *b = &c->dir[TARGET];
  if (a->eof && b->eof && !a->head && !b->head)
    conn_close(c, false);
}

/* The next target that is up, round-robin (no stickiness: a reconnecting client may land on
 * another node, as behind a real load balancer); -1 when every target is down. */
static int pick_target(void) {
  for (unsigned i = 0; i < target_count; i++) {
    unsigned t = (next_target + i) % target_count;
    if (!targets[t].down) {
      next_target = (t + 1) % target_count;
      return (int)t;
    }
  }
  return -1;
}

static void conn_new(int cfd, unsigned target) {
  struct target *t = &targets[target];
  t->routed++;
  int tfd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (tfd < 0) {
    log_msg("socket: %s", strerror(errno));
    close_abortive(cfd);
    return;
  }
  bool connecting = false;
  if (connect(tfd, (const struct sockaddr *)&t->addr, t->addr_len) < 0) {
    if (errno != EINPROGRESS) {
      log_msg("connecting to target %u (%s): %s", target, t->name, strerror(errno));
      close_abortive(tfd);
      close_abortive(cfd);
      return;
    }
    connecting = true;
  }
  struct conn *c = calloc(1, sizeof *c);
  if (!c) {
    close_abortive(tfd);
    close_abortive(cfd);
    return;
  }
  set_nodelay(cfd);
  set_nodelay(tfd);
  c->fd[CLIENT] = cfd;
  c->fd[TARGET] = tfd;
  c->target = target;
  c->pidx[CLIENT] = c->pidx[TARGET] = -1; /* not in this round's pollfd array */
  c->connecting = connecting;
  c->next = conns;
  conns = c;
  stats.active++;
  t->open++;
}

static void accept_clients(void) {
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log_msg("accept: %s (pausing)", strerror(errno));
        accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
      }
      return; /* EAGAIN, EINTR, ECONNABORTED...: poll again */
    }
    stats.accepted++;
    /* A refusal fault, or every target down: close at once, as a cluster with no live node
     * would refuse the connection; the client retries. Picking a target draws nothing from
     * the PRNG, so a chaos seed replays the same faults whatever the targets. */
    int target = -1;
    if (faults.refuse || (faults.chaos && chance(faults.drop_pm)) ||
        (target = pick_target()) < 0) {
      close_abortive(fd);
      stats.refused++;
      continue;
    }
    conn_new(fd, (unsigned)target);
  }
}

static void free_dead_conns(void) {
  struct conn **pp = &conns;
  while (*pp) {
    struct conn *c = *pp;
    if (c->dead) {
      *pp = c->next;
      free(c);
    } else {
      pp = &c->next;
    }
  }
}

/* ---- control connection ---- */

static void ctl_close(void) {
  if (ctl.fd >= 0)
    close(ctl.fd);
  ctl.fd = -1;
  ctl.in_len = ctl.out_len = ctl.pending_off = ctl.pending_len = 0;
  ctl.discarding = ctl.closing = false;
}

static void ctl_reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctl_reply(const char *fmt, ...) {
  char line[CTL_REPLY_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  size_t len = (size_t)n < sizeof line - 2 ? (size_t)n : sizeof line - 2;
  line[len++] = '\n';
  if (ctl.out_len + len > CTL_OUT_MAX) { /* cannot happen: ctl_parse_pending leaves room */
    ctl_close();
    return;
  }
  memcpy(ctl.out + ctl.out_len, line, len);
  ctl.out_len += len;
}

static void ctl_flush(void) {
  while (ctl.fd >= 0 && ctl.out_len > 0) {
    ssize_t n = send(ctl.fd, ctl.out, ctl.out_len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (!would_block(errno))
        ctl_close();
      return;
    }
    memmove(ctl.out, ctl.out + n, ctl.out_len - (size_t)n);
    ctl.out_len -= (size_t)n;
  }
}

/* A blackholed stream that lost bytes is reset, not resumed: TCP never delivers a stream with
 * a gap in the middle, and a client could read the frames after the gap as if nothing was
 * missing. One that lost nothing resumes. */
static void cmd_pass(char **args) {
  (void)args;
  memset(&faults, 0, sizeof faults);
  for (struct conn *c = conns; c; c = c->next) {
    if (c->swallowed && !c->dead)
      conn_reset(c);
    c->blackhole = false;
  }
  ctl_reply("ok");
}

static void cmd_delay(char **args) {
  unsigned ms;
  if (!parse_uint(args[0], DELAY_LIMIT_MS, &ms)) {
    ctl_reply("error delay must be 0..%u milliseconds", DELAY_LIMIT_MS);
    return;
  }
  faults.delay_ms = ms;
  ctl_reply("ok");
}

static void cmd_blackhole(char **args) {
  (void)args;
  faults.blackhole = true;
  for (struct conn *c = conns; c; c = c->next) { /* nothing more arrives after the reply */
    if (c->dir[CLIENT].head || c->dir[TARGET].head)
      c->swallowed = true;
    dir_clear(&c->dir[CLIENT]);
    dir_clear(&c->dir[TARGET]);
  }
  ctl_reply("ok");
}

static void cmd_refuse(char **args) {
  (void)args;
  faults.refuse = true;
  ctl_reply("ok");
}

static void cmd_reset(char **args) {
  (void)args;
  unsigned long n = 0;
  for (struct conn *c = conns; c; c = c->next) {
    if (!c->dead) {
      conn_reset(c);
      n++;
    }
  }
  ctl_reply("ok %lu", n);
}

static void cmd_chaos(char **args) {
  unsigned drop, reset, delay_max, hole;
  if (!parse_uint(args[0], 1000, &drop) || !parse_uint(args[1], 1000, &reset) ||
      !parse_uint(args[2], DELAY_LIMIT_MS, &delay_max) || !parse_uint(args[3], 1000, &hole)) {
    ctl_reply("error chaos takes permilles 0..1000 and a delay 0..%u ms", DELAY_LIMIT_MS);
    return;
  }
  faults.drop_pm = drop;
  faults.reset_pm = reset;
  faults.delay_max_ms = delay_max;
  faults.blackhole_pm = hole;
  faults.chaos = drop || reset || delay_max || hole;
  ctl_reply("ok");
}

static void cmd_stats(char **args) {
  (void)args;
  ctl_reply("ok accepted=%llu active=%lu reset=%llu refused=%llu", stats.accepted,
            stats.active, stats.reset, stats.refused);
}

/* A target index from the control line, or an error reply. */
static bool parse_target_index(const char *arg, unsigned *out) {
  if (parse_uint(arg, target_count - 1, out))
    return true;
  ctl_reply("error no target %s (targets are 0..%u)", arg, target_count - 1);
  return false;
}

/* One line for all targets: "ok 0 ADDR:PORT up open=N routed=M; 1 ...". */
static void cmd_targets(char **args) {
  (void)args;
  char line[CTL_REPLY_MAX];
  size_t len = 0;
  for (unsigned i = 0; i < target_count; i++) {
    const struct target *t = &targets[i];
    int n = snprintf(line + len, sizeof line - len, "%s%u %s %s open=%lu routed=%llu",
                     i ? "; " : "", i, t->name, t->down ? "down" : "up", t->open, t->routed);
    if (n < 0 || (size_t)n >= sizeof line - len) /* cannot happen: MAX_TARGETS bounds it */
      break;
    len += (size_t)n;
  }
  ctl_reply("ok %.*s", (int)len, line);
}

/* A dead node drops its connections: reset them (both sides) instead of leaving them open,
 * so that clients notice at once and reconnect through the proxy to a live node. */
static void cmd_target_down(char **args) {
  unsigned i;
  if (!parse_target_index(args[0], &i))
    return;
  targets[i].down = true;
  unsigned long n = 0;
  for (struct conn *c = conns; c; c = c->next) {
    if (!c->dead && c->target == i) {
      conn_reset(c);
      n++;
    }
  }
  ctl_reply("ok %lu", n);
}

static void cmd_target_up(char **args) {
  unsigned i;
  if (!parse_target_index(args[0], &i))
    return;
  targets[i].down = false;
  ctl_reply("ok");
}

/* Open connections stay where they are: `target-down N` resets them if the old node is gone. */
static void cmd_target(char **args) {
  unsigned i;
  struct target resolved;
  if (!parse_target_index(args[0], &i))
    return;
  if (!resolve_target(args[1], &resolved)) {
    ctl_reply("error bad address %s (want HOST:PORT)", args[1]);
    return;
  }
  memcpy(&targets[i].addr, &resolved.addr, sizeof resolved.addr);
  targets[i].addr_len = resolved.addr_len;
  memcpy(targets[i].name, resolved.name, sizeof resolved.name);
  ctl_reply("ok");
}

static void cmd_quit(char **args) {
  (void)args;
  quit_requested = true;
  ctl_reply("ok");
}

#define MAX_ARGS 4

static const struct command {
  const char *name;
  int nargs;
  const char *usage;
  void (*run)(char **args);
  bool query; /* changes nothing: not logged, since tests poll these in loops */
} commands[] = {
  {"pass", 0, "pass", cmd_pass, false},
  {"delay", 1, "delay MS", cmd_delay, false},
  {"blackhole", 0, "blackhole", cmd_blackhole, false},
  {"refuse", 0, "refuse", cmd_refuse, false},
  {"reset", 0, "reset", cmd_reset, false},
  {"chaos", 4, "chaos DROP_PERMILLE RESET_PERMILLE DELAY_MAX_MS BLACKHOLE_PERMILLE", cmd_chaos,
   false},
  {"stats", 0, "stats", cmd_stats, true},
  {"targets", 0, "targets", cmd_targets, true},
  {"target-down", 1, "target-down N", cmd_target_down, false},
  {"target-up", 1, "target-up N", cmd_target_up, false},
  {"target", 2, "target N HOST:PORT", cmd_target, false},
  {"quit", 0, "quit", cmd_quit, false},
};

static void ctl_line(const char *line, size_t len) {
  char copy[CTL_LINE_MAX + 1];
  char *words[MAX_ARGS + 2];
  int n = 0;
  if (len > 0 && line[len - 1] == '\r')
    len--;
  if (memchr(line, '\0', len)) {
    ctl_reply("error NUL byte in command");
    return;
  }
  memcpy(copy, line, len);
  copy[len] = '\0';
  char *save = NULL;
  for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (n == MAX_ARGS + 1) {
      ctl_reply("error too many arguments");
      return;
    }
    words[n++] = w;
  }
  if (n == 0) {
    ctl_reply("error empty command");
    return;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    const struct command *cmd = &commands[i];
    if (strcmp(words[0], cmd->name) != 0)
      continue;
    if (n - 1 != cmd->nargs) {
      ctl_reply("error usage: %s", cmd->usage);
      return;
    }
    size_t before = ctl.out_len;
    cmd->run(words + 1);
    bool ok = ctl.fd >= 0 && ctl.out_len > before && memcmp(ctl.out + before, "ok", 2) == 0;
    if (ok && !cmd->query) { /* the words of an accepted command are safe to log */
      fprintf(stderr, "ferry-fault-proxy: control:");
      for (int w = 0; w < n; w++)
        fprintf(stderr, " %s", words[w]);
      fprintf(stderr, " -> %.*s", (int)(ctl.out_len - before - 1), ctl.out + before);
      fputc('\n', stderr);
    }
    return;
  }
  ctl_reply("error unknown command");
}

static void ctl_byte(char ch) {
  if (ch == '\n') {
    if (!ctl.discarding)
      ctl_line(ctl.in, ctl.in_len);
    ctl.discarding = false;
    ctl.in_len = 0;
  } else if (ctl.discarding) {
    return;
  } else if (ctl.in_len == CTL_LINE_MAX) {
    ctl_reply("error line too long (max %d bytes)", CTL_LINE_MAX);
    ctl.discarding = true; /* drop the rest of the line */
    ctl.in_len = 0;
  } else {
    ctl.in[ctl.in_len++] = ch;
  }
}

/* Parse the bytes read so far while the longest reply still fits in the output buffer. Each
 * byte ends at most one line and so causes at most one reply; a `targets` reply can be a few
 * KiB, so a burst of short lines could otherwise overflow the buffer of a slow reader. */
static void ctl_parse_pending(void) {
  while (ctl.fd >= 0 && !quit_requested && ctl.pending_off < ctl.pending_len &&
         ctl.out_len + CTL_REPLY_MAX <= CTL_OUT_MAX)
    ctl_byte(ctl.pending[ctl.pending_off++]);
  if (ctl.pending_off == ctl.pending_len)
    ctl.pending_off = ctl.pending_len = 0;
}

/* Parse and reply until neither can progress: replies sent make room to parse more. */
static void ctl_pump(void) {
  while (ctl.fd >= 0) {
    ctl_parse_pending();
    size_t unsent = ctl.out_len;
    ctl_flush();
    if (ctl.fd < 0 || ctl.pending_len == 0 || ctl.out_len == unsent)
      return;
  }
}

/* New bytes are read only once the previous ones are parsed, and not while many replies are
 * unsent: a client that sends commands without reading replies is throttled. */
static bool ctl_may_read(void) {
  return !ctl.closing && ctl.pending_len == 0 && ctl.out_len < CTL_OUT_READ_LIMIT;
}

static void ctl_read(void) {
  ssize_t n = recv(ctl.fd, ctl.pending, sizeof ctl.pending, 0);
  if (n < 0) {
    if (!would_block(errno))
      ctl_close();
    return;
  }
  if (n == 0) { /* EOF: a last line without newline still counts */
    if (ctl.in_len > 0 && !ctl.discarding)
      ctl_line(ctl.in, ctl.in_len);
    ctl.in_len = 0;
    ctl.closing = true;
    return;
  }
  ctl.pending_off = 0;
  ctl.pending_len = (size_t)n;
}

static short ctl_events(void) {
  short ev = 0;
  if (ctl_may_read())
    ev |= POLLIN;
  if (ctl.out_len > 0)
    ev |= POLLOUT;
  return ev;
}

static void ctl_handle(short revents) {
  bool readable = revents & (POLLIN | POLLHUP | POLLERR);
  if (readable && ctl_may_read())
    ctl_read();
  ctl_pump();
  if (ctl.fd >= 0 && ctl.closing && ctl.out_len == 0)
    ctl_close();
}

static void ctl_accept(void) {
  int fd = accept4(ctl_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0)
    ctl.fd = fd;
  else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
    accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
}

/* ---- the poll loop ---- */

struct pollset {
  struct pollfd *fds;
  nfds_t n, cap;
};

/* Add fd to the set if there is something to wait for; returns its index or -1. */
static int pollset_add(struct pollset *ps, int fd, short events) {
  if (events == 0)
    return -1;
  if (ps->n == ps->cap) {
    nfds_t cap = ps->cap ? ps->cap * 2 : 64;
    struct pollfd *fds = realloc(ps->fds, cap * sizeof *fds);
    if (!fds) {
      log_msg("out of memory");
      exit(1);
    }
    ps->fds = fds;
    ps->cap = cap;
  }
  ps->fds[ps->n] = (struct pollfd){.fd = fd, .events = events};
  return (int)ps->n++;
}

static short revents_at(const struct pollset *ps, int i) { return i < 0 ? 0 : ps->fds[i].revents; }

static void wake_at(uint64_t at, uint64_t now) {
  int64_t ms = at > now ? (int64_t)(at - now) : 0;
  if (wait_ms < 0 || ms < wait_ms)
    wait_ms = ms;
}

static short conn_events(struct conn *c, int s, uint64_t now) {
  if (s == TARGET && c->connecting)
    return POLLOUT;
  short ev = want_read(c, s) ? POLLIN : 0;
  if (dir_can_flush(c, !s)) { /* bytes from the other side waiting for fd[s] */
    uint64_t due = c->dir[!s].head->due_ms;
    if (due <= now)
      ev |= POLLOUT;
    else
      wake_at(due, now);
  }
  return ev;
}

static void conn_handle(struct conn *c, const struct pollset *ps) {
  for (int s = 0; s < 2 && !c->dead; s++) {
    short re = revents_at(ps, c->pidx[s]);
    if (!re)
      continue;
    if (s == TARGET && c->connecting) {
      finish_connect(c);
      continue;
    }
    if (re & POLLERR) {
      conn_close(c, true);
      return;
    }
    if ((re & (POLLIN | POLLHUP)) && want_read(c, s))
      read_side(c, s);
    if (!c->dead && (re & (POLLOUT | POLLHUP)))
      flush_dir(c, !s);
  }
}

static int run(const sigset_t *waitmask) {
  struct pollset ps = {0};
  while (!stop_signal && !quit_requested) {
    uint64_t now = now_ms();
    wait_ms = -1;
    ps.n = 0;
    int li = -1, cli = -1, ci = -1;
    bool accepting = now >= accept_paused_until; /* paused while out of descriptors */
    if (!accepting)
      wake_at(accept_paused_until, now);
    if (accepting)
      li = pollset_add(&ps, listen_fd, POLLIN);
    if (ctl.fd >= 0)
      ci = pollset_add(&ps, ctl.fd, ctl_events());
    else if (accepting)
      cli = pollset_add(&ps, ctl_listen_fd, POLLIN);
    for (struct conn *c = conns; c; c = c->next)
      for (int s = 0; s < 2; s++)
        c->pidx[s] = pollset_add(&ps, c->fd[s], conn_events(c, s, now));

    struct timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (wait_ms % 1000) * 1000000};
    if (ppoll(ps.fds, ps.n, wait_ms >= 0 ? &ts : NULL, waitmask) < 0) {
      if (errno == EINTR || errno == ENOMEM)
        continue;
      log_msg("poll: %s", strerror(errno));
      free(ps.fds);
      return 1;
    }
    if (revents_at(&ps, ci))
      ctl_handle(revents_at(&ps, ci));
    if (revents_at(&ps, cli))
      ctl_accept();
    for (struct conn *c = conns; c; c = c->next)
      if (!c->dead)
        conn_handle(c, &ps);
    if (revents_at(&ps, li))
      accept_clients();
    for (struct conn *c = conns; c; c = c->next)
      conn_update(c);
    free_dead_conns();
  }
  free(ps.fds);
  return 0;
}

/* ---- setup ---- */

static void on_signal(int sig) { stop_signal = sig; }

/* Block SIGTERM/SIGINT except inside ppoll(), so that a signal can never slip in between the
 * check of stop_signal and the wait. *waitmask receives the mask to wait with. */
static void setup_signals(sigset_t *waitmask) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, NULL);

  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, waitmask);
  sigdelset(waitmask, SIGTERM);
  sigdelset(waitmask, SIGINT);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

/* A listening socket on 127.0.0.1 with a port chosen by the OS. */
static int listen_local(unsigned *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, SOMAXCONN) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* Write "PORT\n" to path.tmp, then rename it to path: readers never see half a file. */
static bool write_port_file(const char *path, unsigned port) {
  size_t size = strlen(path) + sizeof ".tmp";
  char *tmp = malloc(size);
  if (!tmp)
    return false;
  snprintf(tmp, size, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  bool ok = f != NULL;
  if (f) {
    ok = fprintf(f, "%u\n", port) > 0;
    ok = fclose(f) == 0 && ok;
  }
  ok = ok && rename(tmp, path) == 0;
  if (!ok)
    log_msg("writing %s: %s", path, strerror(errno));
  free(tmp);
  return ok;
}

struct options {
  const char *targets[MAX_TARGETS]; /* --target, in order: the index is the target number */
  unsigned target_count;
  const char *port_file, *control_port_file;
  uint64_t seed;
};

static void usage(FILE *out) {
  fputs("usage: ferry-fault-proxy --target HOST:PORT [--target HOST:PORT ...]\n"
        "                         [--port-file FILE] [--control-port-file FILE] [--seed N]\n",
        out);
}

static bool parse_seed(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (!*s)
    return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
      return false;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  return true;
}

/* Accepts "--name value" and "--name=value". */
static bool parse_args(int argc, char **argv, struct options *o) {
  static const char *const names[] = {"--target", "--port-file", "--control-port-file",
                                      "--seed"};
  const char *seed = NULL, *target = NULL;
  const char **slots[] = {&target, &o->port_file, &o->control_port_file, &seed};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    size_t k = 0;
    const char *value = NULL;
    for (; k < sizeof names / sizeof names[0]; k++) {
      size_t len = strlen(names[k]);
      if (strncmp(argv[i], names[k], len) != 0)
        continue;
      if (argv[i][len] == '=') {
        value = argv[i] + len + 1;
        break;
      }
      if (argv[i][len] == '\0' && i + 1 < argc) {
        value = argv[++i];
        break;
      }
    }
    if (!value) {
      log_msg("bad argument: %s", argv[i]);
      return false;
    }
    *slots[k] = value;
    if (slots[k] == &target) { /* the only option that may repeat: one per cluster node */
      if (o->target_count == MAX_TARGETS) {
        log_msg("too many --target options (at most %d)", MAX_TARGETS);
        return false;
      }
      o->targets[o->target_count++] = value;
    }
  }
  o->seed = 1;
  if (seed && !parse_seed(seed, &o->seed)) {
    log_msg("bad seed: %s", seed);
    return false;
  }
  if (o->target_count == 0) {
    log_msg("--target is required");
    return false;
  }
  return true;
}

static void cleanup(void) {
  for (struct conn *c = conns; c; c = c->next)
    conn_close(c, false);
  free_dead_conns();
  ctl_flush(); /* best effort: the reply to `quit` */
  ctl_close();
  if (listen_fd >= 0)
    close(listen_fd);
  if (ctl_listen_fd >= 0)
    close(ctl_listen_fd);
}

int main(int argc, char **argv) {
  struct options opt = {0};
  if (!parse_args(argc, argv, &opt)) {
    usage(stderr);
    return 2;
  }
  sigset_t waitmask;
  setup_signals(&waitmask);
  for (unsigned i = 0; i < opt.target_count; i++) {
    if (!resolve_target(opt.targets[i], &targets[i])) {
      log_msg("bad --target %s (want HOST:PORT)", opt.targets[i]);
      return 2;
    }
  }
  target_count = opt.target_count;
  unsigned port = 0, ctl_port = 0;
  listen_fd = listen_local(&port);
  ctl_listen_fd = listen_local(&ctl_port);
  if (listen_fd < 0 || ctl_listen_fd < 0) {
    log_msg("listening on 127.0.0.1: %s", strerror(errno));
    return 1;
  }
  /* The control port file first: once the port file exists, both do. */
  if ((opt.control_port_file && !write_port_file(opt.control_port_file, ctl_port)) ||
      (opt.port_file && !write_port_file(opt.port_file, port)))
    return 1;
  rng_state = opt.seed;
  printf("proxy port %u\ncontrol port %u\nseed %" PRIu64 "\n", port, ctl_port, opt.seed);
  fflush(stdout);
  log_msg("proxy port %u, control port %u, seed %" PRIu64, port, ctl_port, opt.seed);
  for (unsigned i = 0; i < target_count; i++)
    log_msg("target %u: %s", i, targets[i].name);

  int rc = run(&waitmask);
  if (stop_signal)
    log_msg("exiting on signal %d", (int)stop_signal);
  cleanup();
  return rc;
}
