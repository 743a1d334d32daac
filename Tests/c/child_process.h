/*
 * child_process.h — the multi-process C tests' children: this same program, forked and then
 * exec'd in a child role, so that a child never inherits Ferry's in-process state (its
 * registry of open stores, its loop thread) from the parent. Optional pipes: the child's
 * stdin (the parent writes "go" lines) and stdout (the child answers).
 */
#ifndef FERRY_TEST_CHILD_PROCESS_H
#define FERRY_TEST_CHILD_PROCESS_H

#include "check.h"

#include <limits.h>
#include <sys/wait.h>

static char self_exe[PATH_MAX];

/* Remembers this program's path for child_spawn (call first in main). */
static void child_find_self(const char *argv0) {
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (n <= 0) {
    snprintf(self_exe, sizeof self_exe, "%s", argv0);
  } else {
    self_exe[n] = '\0';
  }
}

struct child {
  pid_t pid;
  int to;   /* the child's stdin, or -1 */
  int from; /* the child's stdout, or -1 */
};

/* Runs this program with `args` (argv[1] on: NULL-terminated, at most 7). */
static struct child child_spawn(const char *const *args, bool pipes) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (pipes) CHECK(pipe(in) == 0 && pipe(out) == 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (pipes) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[0]);
      close(in[1]);
      close(out[0]);
      close(out[1]);
    }
    char *argv[9] = {self_exe};
    for (int i = 0; i < 7 && args[i] != NULL; i++) argv[i + 1] = (char *)args[i];
    execv(self_exe, argv);
    _exit(127);
  }
  struct child ch = {pid, -1, -1};
  if (pipes) {
    close(in[0]);
    close(out[1]);
    ch.to = in[1];
    ch.from = out[0];
  }
  return ch;
}

/* Closes the pipes and reaps the child: its exit status (0..255), or 1000 + signal. */
static int wait_child(struct child *ch) {
  if (ch->to >= 0) close(ch->to);
  if (ch->from >= 0) close(ch->from);
  ch->to = ch->from = -1;
  int status = 0;
  pid_t r;
  do r = waitpid(ch->pid, &status, 0);
  while (r < 0 && errno == EINTR);
  CHECK(r == ch->pid);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

#define CHECK_CHILD_EXIT(ch, code)                                                        \
  do {                                                                                    \
    struct child check_ch_ = (ch);                                                        \
    int check_st_ = wait_child(&check_ch_);                                               \
    CHECKF(check_st_ == (code), "child %d exited with %s %d, expected %d", (int)check_ch_.pid, \
           check_st_ >= 1000 ? "signal" : "status", check_st_ >= 1000 ? check_st_ - 1000 : check_st_, \
           (code));                                                                       \
  } while (0)

/* Tells a child with pipes to go on. */
static void release(struct child *ch) { CHECK(write(ch->to, "go\n", 3) == 3); }

#endif
