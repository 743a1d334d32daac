/*
 * sync_server.h — starts ferry-server for a C test: $FERRY_SERVER (default
 * <repo>/build/ferry-server) on <repo>/examples/item-app (app id "item-app-seeds"), a fresh
 * data directory, port 0 and a port file polled with a deadline; stopped with SIGTERM (waited
 * for) by server_stop() or at exit, and by the kernel when the test dies (PR_SET_PDEATHSIG).
 * server_app_dir chooses another app directory. Include after check.h; CMake defines FERRY_REPO_DIR.
 */
#ifndef FERRY_TEST_SYNC_SERVER_H
#define FERRY_TEST_SYNC_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#ifndef FERRY_REPO_DIR
#error "FERRY_REPO_DIR must name the repository (CMake passes it)"
#endif

#define SIGNING_KEY "jwtSigningKey=a-host-signing-key-of-at-least-32-bytes!"
/* The admin API's token (docs/server-config.md): server_admin_post uses it. */
#define ADMIN_TOKEN "an-admin-token-for-the-c-tests-of-32-bytes-or-more"

extern char **environ;

static pid_t server_pid = 0;
static char base_url[64];
static int server_listen_port = 0;
/* Set both before server_start() to serve https and wss with this PEM certificate and key
 * (--tls-certificate, --tls-key): base_url is then https://127.0.0.1:<port>. */
static const char *server_tls_certificate __attribute__((unused)) = NULL;
static const char *server_tls_key __attribute__((unused)) = NULL;
/* Set before server_start() to serve another app directory than examples/item-app (e.g.
 * Tests/Fixtures/data-api-app, the same app with the Data API on). */
static const char *server_app_dir __attribute__((unused)) = NULL;
/* How many servers this test started: each after the first gets a data directory of its own. */
static int server_starts = 0;

static void server_stop(void) {
  if (server_pid <= 0 || getpid() == server_pid) return;
  pid_t pid = server_pid;
  server_pid = 0;
  kill(pid, SIGTERM);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 20) {
      fprintf(stderr, "ferry-server did not stop within 20 s of SIGTERM: killing it\n");
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return;
    }
    struct timespec tick = {0, 20 * 1000 * 1000};
    nanosleep(&tick, NULL); /* polling a child's exit with a deadline */
  }
}

static char server_skip_reason[700];

/* Starts the server and fills base_url; false (with server_skip_reason) when there is no
 * server binary. Any other failure fails the test. */
static bool server_start(void) {
  const char *server = getenv("FERRY_SERVER");
  if (server == NULL || server[0] == '\0') server = FERRY_REPO_DIR "/build/ferry-server";
  if (access(server, X_OK) != 0) {
    snprintf(server_skip_reason, sizeof server_skip_reason, "no ferry-server at %s (set FERRY_SERVER)", server);
    return false;
  }
  const char *app_dir = server_app_dir != NULL ? server_app_dir : FERRY_REPO_DIR "/examples/item-app";
  char data_dir[640], port_file[640], leaf[64];
  snprintf(leaf, sizeof leaf, server_starts == 0 ? "server-data" : "server-data-%d", server_starts);
  snprintf(data_dir, sizeof data_dir, "%s", test_path(leaf));
  snprintf(leaf, sizeof leaf, server_starts == 0 ? "server-port" : "server-port-%d", server_starts);
  snprintf(port_file, sizeof port_file, "%s", test_path(leaf));
  server_starts++;
  char *argv[] = {(char *)server, "--app-dir", (char *)app_dir, "--data", data_dir, "--port", "0",
                  "--port-file", port_file, "--log-level", "warning", "--weak-password-hashing-for-tests",
                  NULL, NULL, NULL, NULL, NULL};
  const bool tls = server_tls_certificate != NULL && server_tls_key != NULL;
  if (tls) {
    argv[12] = "--tls-certificate";
    argv[13] = (char *)server_tls_certificate;
    argv[14] = "--tls-key";
    argv[15] = (char *)server_tls_key;
  }
  size_t n = 0;
  while (environ[n]) n++;
  char **envp = calloc(n + 3, sizeof *envp);
  CHECK(envp != NULL);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "jwtSigningKey=", 14) != 0 && strncmp(environ[i], "FERRY_ADMIN_TOKEN=", 18) != 0) envp[k++] = environ[i];
  envp[k++] = SIGNING_KEY;
  envp[k++] = "FERRY_ADMIN_TOKEN=" ADMIN_TOKEN;
  envp[k] = NULL;
  /* fork and exec rather than posix_spawn, to ask for SIGTERM when this test dies: a test
   * killed by a signal runs no atexit handler, and a server left behind kept CTest's output
   * pipe open, so CTest waited for it for ever. Only async-signal-safe calls in the child. */
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECKF(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127); /* the test died before the request took effect */
    execve(server, argv, envp);
    _exit(127);
  }
  free(envp);
  server_pid = pid;
  atexit(server_stop); /* also when a CHECK fails and exits */

  /* wait for the port file: exists and holds a number */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int port = 0;
  for (;;) {
    FILE *f = fopen(port_file, "r");
    if (f) {
      if (fscanf(f, "%d", &port) != 1) port = 0;
      fclose(f);
      if (port > 0) break;
    }
    int status = 0;
    CHECKF(waitpid(pid, &status, WNOHANG) == 0, "ferry-server exited before writing its port (status %d)", status);
    clock_gettime(CLOCK_MONOTONIC, &now);
    CHECKF(now.tv_sec - start.tv_sec < 60, "ferry-server wrote no port file within 60 s");
    struct timespec tick = {0, 20 * 1000 * 1000};
    nanosleep(&tick, NULL); /* polling a file with a deadline */
  }
  snprintf(base_url, sizeof base_url, "%s://127.0.0.1:%d", tls ? "https" : "http", port);
  server_listen_port = port;
  return true;
}

/* POSTs to the server's admin API (/api/admin/v1/<path>, e.g. "sync/terminate") over a plain
 * HTTP/1.1 connection and returns the answer's status code (-1 when there is no answer). */
static __attribute__((unused)) int server_admin_post(const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)server_listen_port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  char request[512];
  int n = snprintf(request, sizeof request,
                   "POST /api/admin/v1/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer " ADMIN_TOKEN
                   "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                   path, server_listen_port);
  for (int sent = 0; sent < n;) {
    ssize_t w = write(fd, request + sent, (size_t)(n - sent));
    if (w <= 0) {
      close(fd);
      return -1;
    }
    sent += (int)w;
  }
  char answer[64] = {0};
  size_t got = 0;
  while (got < sizeof answer - 1) {
    ssize_t r = read(fd, answer + got, sizeof answer - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  int status = -1;
  if (sscanf(answer, "HTTP/1.1 %d", &status) != 1) status = -1;
  return status;
}

/* A TCP port on 127.0.0.1 that nothing listens on (bound, then closed). */
static inline int closed_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(s >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  CHECK(getsockname(s, (struct sockaddr *)&a, &len) == 0);
  close(s);
  return ntohs(a.sin_port);
}

#endif /* FERRY_TEST_SYNC_SERVER_H */
