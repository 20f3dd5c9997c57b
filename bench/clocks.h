// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// The bench's C programs' clocks: seconds of wall time and of this process's CPU.
#ifndef NETACTIVITY_BENCH_CLOCKS_H
#define NETACTIVITY_BENCH_CLOCKS_H
#include <time.h>

static inline double seconds_of(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static inline double now(void) { return seconds_of(CLOCK_MONOTONIC); }
static inline double cpu_now(void) { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }

#endif
