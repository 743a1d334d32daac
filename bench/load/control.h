/*
 * control.h — how the driver (bench/load/run) steps its workers through a scenario.
 *
 * A worker sets up its devices, prints a `READY` line and waits for SIGUSR1; each further
 * phase boundary (start writing, stop writing, disconnect) is one more SIGUSR1. Signals,
 * because the driver is a shell script with several workers and must tell them all at the
 * same moment; every wait has a deadline, so a lost driver never leaves a worker hanging.
 */
#ifndef LOAD_CONTROL_H
#define LOAD_CONTROL_H

#include <stdint.h>

/* Blocks SIGUSR1 in the calling thread, and so in every thread started later (Ferry's
 * included), and counts SIGPIPEs instead of dying of them: call first thing in main.
 * libferry writes to its sockets with libuv, which leaves SIGPIPE to the host; a write to a
 * connection the server has just closed would otherwise end the worker without a word. */
void control_init(void);
/* SIGPIPEs received so far (each one a write that failed with EPIPE instead). */
long control_sigpipes(void);
/* Waits for the next SIGUSR1 until deadline_us (clock.h); 0, or -1 on the deadline. */
int control_wait(uint64_t deadline_us);

#endif
