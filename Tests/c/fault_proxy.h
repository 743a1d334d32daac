/*
 * fault_proxy.h — starts ferry-fault-proxy (tools/fault-proxy) for a C test: $FERRY_FAULT_PROXY
 * (default <repo>/build/ferry-fault-proxy) with --target 127.0.0.1:<port>, --port-file and
 * --control-port-file in the test's temporary directory. proxy_start() waits for the port file
 * with a deadline, connects to the control port and fills p->url (http://127.0.0.1:<proxy
 * port>: an App's base_url). proxy_command() sends one command line and reads its one-line
 * reply ("ok..." or "error ..."). proxy_stop() ends the proxy with SIGTERM and checks that it
 * exited with 0; proxies still running at exit get SIGTERM (waited for) without checks.
 *
 * The proxy's stdout and stderr go to a log file next to its port files (never to an unread
 * pipe: the proxy would block once it is full); proxy_dump_log() prints it.
 *
 * Include after check.h; CMake defines FERRY_REPO_DIR. Several proxies may run at once (one
 * per scenario keeps faults and counters apart).
 */
#ifndef FERRY_TEST_FAULT_PROXY_H
#define FERRY_TEST_FAULT_PROXY_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#ifndef FERRY_REPO_DIR
#error "FERRY_REPO_DIR must name the repository (CMake passes it)"
#endif

extern char **environ;

#define FAULT_PROXY_MAX 16
#define FAULT_PROXY_DEADLINE_S 30 /* for the port file, the control connection and each reply */

struct fault_proxy {
  pid_t pid;
  int port;         /* where clients connect */
  int control_port; /* where commands go */
  int ctl;          /* the connected control socket */
  char url[64];     /* http://127.0.0.1:<port>, an App's base_url */
  char log_path[640];
};

static struct fault_proxy *fault_proxy_live_[FAULT_PROXY_MAX];
static int fault_proxy_counter_ = 0;
static char fault_proxy_skip_reason[700];

static const char *fault_proxy_binary_(void) {
  const char *bin = getenv("FERRY_FAULT_PROXY");
  if (bin == NULL || bin[0] == '\0') bin = FERRY_REPO_DIR "/build/ferry-fault-proxy";
  return bin;
}

/* Whether the proxy binary exists (else fault_proxy_skip_reason says where it was looked for). */
static bool proxy_available(void) {
  const char *bin = fault_proxy_binary_();
  if (access(bin, X_OK) == 0) return true;
  snprintf(fault_proxy_skip_reason, sizeof fault_proxy_skip_reason,
           "no ferry-fault-proxy at %s (build it, or set FERRY_FAULT_PROXY)", bin);
  return false;
}

static double fault_proxy_now_(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Sends SIGTERM and waits (20 s, then SIGKILL); the exit status, or -1 if it had to be killed. */
static int fault_proxy_terminate_(pid_t pid) {
  kill(pid, SIGTERM);
  double start = fault_proxy_now_();
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (r < 0 && errno != EINTR) return -1;
    if (fault_proxy_now_() - start > 20) {
      fprintf(stderr, "ferry-fault-proxy %d did not stop within 20 s of SIGTERM: killing it\n", (int)pid);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    struct timespec tick = {0, 10 * 1000 * 1000};
    nanosleep(&tick, NULL); /* polling a child's exit with a deadline */
  }
}

static void fault_proxy_stop_all_(void) {
  for (int i = 0; i < FAULT_PROXY_MAX; i++) {
    struct fault_proxy *p = fault_proxy_live_[i];
    if (p == NULL || p->pid <= 0 || getpid() == p->pid) continue;
    if (p->ctl >= 0) close(p->ctl);
    p->ctl = -1;
    fault_proxy_terminate_(p->pid);
    p->pid = 0;
    fault_proxy_live_[i] = NULL;
  }
}

/* Prints the proxy's log (its stdout and stderr) to stderr, for failure diagnostics. */
static void proxy_dump_log(const struct fault_proxy *p) {
  FILE *f = fopen(p->log_path, "r");
  if (f == NULL) return;
  fprintf(stderr, "---- %s ----\n", p->log_path);
  char line[512];
  while (fgets(line, sizeof line, f)) fputs(line, stderr);
  fprintf(stderr, "---- end of proxy log ----\n");
  fclose(f);
}

static int fault_proxy_read_port_(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  int port = 0;
  if (fscanf(f, "%d", &port) != 1) port = 0;
  fclose(f);
  return port;
}

/* Starts a proxy in front of 127.0.0.1:target_port and connects to its control port. Any
 * failure fails the test (check proxy_available() first to skip instead). */
static void proxy_start(struct fault_proxy *p, int target_port) {
  memset(p, 0, sizeof *p);
  p->ctl = -1;
  const char *bin = fault_proxy_binary_();
  int n = ++fault_proxy_counter_;
  char port_file[640], ctl_file[640], leaf[64], target[64];
  snprintf(leaf, sizeof leaf, "proxy-%d.port", n);
  snprintf(port_file, sizeof port_file, "%s", test_path(leaf));
  snprintf(leaf, sizeof leaf, "proxy-%d.control-port", n);
  snprintf(ctl_file, sizeof ctl_file, "%s", test_path(leaf));
  snprintf(leaf, sizeof leaf, "proxy-%d.log", n);
  snprintf(p->log_path, sizeof p->log_path, "%s", test_path(leaf));
  snprintf(target, sizeof target, "127.0.0.1:%d", target_port);

  posix_spawn_file_actions_t fa;
  CHECK(posix_spawn_file_actions_init(&fa) == 0);
  CHECK(posix_spawn_file_actions_addopen(&fa, 1, p->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600) == 0);
  CHECK(posix_spawn_file_actions_adddup2(&fa, 1, 2) == 0);
  char *argv[] = {(char *)bin, "--target", target, "--port-file", port_file, "--control-port-file", ctl_file, NULL};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  CHECKF(rc == 0, "posix_spawn(%s): %s", bin, strerror(rc));
  p->pid = pid;
  int slot = -1;
  for (int i = 0; i < FAULT_PROXY_MAX && slot < 0; i++)
    if (fault_proxy_live_[i] == NULL) slot = i;
  CHECKF(slot >= 0, "more than %d fault proxies at once", FAULT_PROXY_MAX);
  static bool registered = false;
  if (!registered) {
    atexit(fault_proxy_stop_all_); /* also when a CHECK fails and exits */
    registered = true;
  }
  fault_proxy_live_[slot] = p;

  /* the port file is written after the control port file: once it exists, both do */
  double start = fault_proxy_now_();
  while ((p->port = fault_proxy_read_port_(port_file)) <= 0) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      p->pid = 0;
      fault_proxy_live_[slot] = NULL;
      proxy_dump_log(p);
      CHECKF(false, "ferry-fault-proxy exited before writing its port file (status %d)", status);
    }
    CHECKF(fault_proxy_now_() - start < FAULT_PROXY_DEADLINE_S, "ferry-fault-proxy wrote no port file within %d s",
           FAULT_PROXY_DEADLINE_S);
    struct timespec tick = {0, 10 * 1000 * 1000};
    nanosleep(&tick, NULL); /* polling a file with a deadline */
  }
  p->control_port = fault_proxy_read_port_(ctl_file);
  CHECKF(p->control_port > 0, "no control port in %s", ctl_file);
  snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);

  p->ctl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(p->ctl >= 0);
  struct timeval tv = {FAULT_PROXY_DEADLINE_S, 0};
  CHECK(setsockopt(p->ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
  CHECK(setsockopt(p->ctl, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)p->control_port);
  CHECKF(connect(p->ctl, (struct sockaddr *)&a, sizeof a) == 0, "connecting to the proxy's control port %d: %s",
         p->control_port, strerror(errno));
}

/* Sends one command and reads its reply line (without the newline) into reply. Returns
 * whether the reply starts with "ok". A broken control connection or a missing reply fails
 * the test. */
static bool proxy_command(struct fault_proxy *p, const char *command, char *reply, size_t size) {
  char line[1100];
  int len = snprintf(line, sizeof line, "%s\n", command);
  CHECK(len > 0 && (size_t)len < sizeof line);
  for (int off = 0; off < len;) {
    ssize_t w = send(p->ctl, line + off, (size_t)(len - off), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    CHECKF(w > 0, "sending \"%s\" to the fault proxy: %s", command, strerror(errno));
    off += (int)w;
  }
  size_t got = 0;
  for (;;) {
    char c;
    ssize_t r = recv(p->ctl, &c, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) proxy_dump_log(p);
    CHECKF(r == 1, "no reply from the fault proxy to \"%s\" within %d s: %s", command, FAULT_PROXY_DEADLINE_S,
           r == 0 ? "connection closed" : strerror(errno));
    if (c == '\n') break;
    if (got + 1 < size) reply[got++] = c;
  }
  if (got > 0 && reply[got - 1] == '\r') got--;
  reply[got] = '\0';
  return strncmp(reply, "ok", 2) == 0;
}

/* A command that must be accepted; its reply (static buffer, valid until the next call). */
static const char *proxy_do(struct fault_proxy *p, const char *command) {
  static char reply[256];
  bool ok = proxy_command(p, command, reply, sizeof reply);
  CHECKF(ok, "the fault proxy answered \"%s\" to \"%s\"", reply, command);
  return reply;
}

struct proxy_stats {
  unsigned long long accepted, active, reset, refused;
};

static struct proxy_stats proxy_stats(struct fault_proxy *p) {
  struct proxy_stats s = {0, 0, 0, 0};
  const char *reply = proxy_do(p, "stats");
  CHECKF(sscanf(reply, "ok accepted=%llu active=%llu reset=%llu refused=%llu", &s.accepted, &s.active, &s.reset,
                &s.refused) == 4,
         "unexpected stats reply \"%s\"", reply);
  return s;
}

/* Polls the proxy's stats until `active` equals want (deadline in seconds); the last value seen. */
static unsigned long long proxy_wait_active(struct fault_proxy *p, unsigned long long want, int deadline_s) {
  double start = fault_proxy_now_();
  for (;;) {
    unsigned long long active = proxy_stats(p).active;
    if (active == want || fault_proxy_now_() - start > deadline_s) return active;
    struct timespec tick = {0, 20 * 1000 * 1000};
    nanosleep(&tick, NULL); /* polling the proxy's counters with a deadline */
  }
}

/* Stops the proxy (SIGTERM) and checks it exited with 0. */
static void proxy_stop(struct fault_proxy *p) {
  if (p->pid <= 0) return;
  if (p->ctl >= 0) close(p->ctl);
  p->ctl = -1;
  pid_t pid = p->pid;
  p->pid = 0;
  for (int i = 0; i < FAULT_PROXY_MAX; i++)
    if (fault_proxy_live_[i] == p) fault_proxy_live_[i] = NULL;
  int status = fault_proxy_terminate_(pid);
  if (status != 0) proxy_dump_log(p);
  CHECKF(status == 0, "ferry-fault-proxy exited with %d after SIGTERM, expected 0", status);
}

#endif /* FERRY_TEST_FAULT_PROXY_H */
