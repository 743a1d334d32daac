/* control.c — see control.h. */
#define _GNU_SOURCE 1
#include "control.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>

#include "clock.h"

static sigset_t usr1;
static atomic_long sigpipes; /* lock-free, so safe in a handler */

static void on_sigpipe(int signal) {
  (void)signal;
  atomic_fetch_add(&sigpipes, 1);
}

void control_init(void) {
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);
  struct sigaction a = {.sa_handler = on_sigpipe};
  sigemptyset(&a.sa_mask);
  sigaction(SIGPIPE, &a, NULL);
}

long control_sigpipes(void) { return atomic_load(&sigpipes); }

int control_wait(uint64_t deadline_us) {
  for (;;) {
    uint64_t now = now_us();
    if (now >= deadline_us) return -1;
    struct timespec left = timespec_of_us(deadline_us - now);
    if (sigtimedwait(&usr1, NULL, &left) == SIGUSR1) return 0;
    if (errno != EINTR && errno != EAGAIN) return -1;
  }
}
