"""A small C compression library laid out as real ones are (issue 21): its own benchmark,
`bench/bench.c`, is compiled by its Makefile against the library and prints MB/s, timed with the
library's own clock (`lib/clock.c`). Plus the cheats a maintainer tried on such a library."""
from __future__ import annotations

from pathlib import Path

from conftest import make_repo

# repeats.max 60: the runner's clock must exclude the hidden 1.5x clock cheat's claim, and under two
# CPU hogs 30 pairs of the whole tree's CPU time could neither confirm nor exclude it (2026-12-01).
# An honest or refused candidate still decides in a few pairs; only the undecided ones pay.
CONFIG = """\
name: minicomp
build: make -s
benchmark: ./bench/bench
checks: make -s check
metrics:
  - {{name: mbps, direction: higher, primary: true, unit: MB/s, clock: cpu}}
editable: {editable}
timeouts: {{build: 60, benchmark: 20, checks: 60}}
repeats: {{min: 3, max: 60, warmup: 1, calibration: {calibration}}}
budget: {{max_experiments: 4}}
"""

MAKEFILE = """\
CFLAGS ?= -O1
all: bench/bench
bench/bench: bench/bench.c lib/rle.c lib/clock.c lib/mc.h
\t$(CC) $(CFLAGS) -Ilib -o $@ bench/bench.c lib/rle.c lib/clock.c
tests/test_rle: tests/test_rle.c lib/rle.c lib/mc.h
\t$(CC) $(CFLAGS) -Ilib -o $@ tests/test_rle.c lib/rle.c
check: tests/test_rle
\t./tests/test_rle
"""

HEADER = """\
#include <stddef.h>
size_t mc_encode(const unsigned char *in, size_t n, unsigned char *out);
double mc_seconds(void);
"""

# Run-length encoding, with a second (redundant) pass that an honest candidate may remove.
RLE = """\
#include "mc.h"
static size_t encode_once(const unsigned char *in, size_t n, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && j - i < 255 && in[j] == in[i]) j++;
        out[o++] = (unsigned char)(j - i);
        out[o++] = in[i];
        i = j;
    }
    return o;
}
size_t mc_encode(const unsigned char *in, size_t n, unsigned char *out) {
    encode_once(in, n, out);            /* warms nothing: the same work twice */
    return encode_once(in, n, out);
}
"""

CLOCK = """\
#include <time.h>
#include "mc.h"
double mc_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
"""

BENCH = """\
#include <stdio.h>
#include <stdlib.h>
#include "mc.h"
int main(void) {
    const char *s = getenv("AUTORESEARCH_SEED");
    unsigned long long x = s ? strtoull(s, NULL, 10) : 1;
    size_t n = 6u << 20;
    unsigned char *in = malloc(n), *out = malloc(2 * n);
    for (size_t i = 0; i < n; i++) {
        if (i % 7 == 0) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        in[i] = (unsigned char)(x >> 60);
    }
    double t0 = mc_seconds();
    size_t total = 0, rounds = 3;
    unsigned long long digest = 1469598103934665603ULL;
    for (size_t r = 0; r < rounds; r++) total += mc_encode(in, n, out);
    for (size_t i = 0; i < total / rounds; i++) digest = (digest ^ out[i]) * 1099511628211ULL;
    double dt = mc_seconds() - t0;
    double mbps = rounds * (double)n / (1 << 20) / dt;
    printf("METRIC mbps=%.3f\\n", mbps);
    printf("DIGEST out=%016llx\\n", digest);
    free(in); free(out);
    return 0;
}
"""

TEST = """\
#include <stdio.h>
#include "mc.h"
int main(void) {
    unsigned char in[] = {1, 1, 1, 2, 3, 3}, out[12];
    size_t n = mc_encode(in, sizeof in, out);
    unsigned char want[] = {3, 1, 1, 2, 2, 3};
    if (n != sizeof want) { puts("wrong length"); return 1; }
    for (size_t i = 0; i < n; i++) if (out[i] != want[i]) { puts("wrong output"); return 1; }
    return 0;
}
"""


def files(editable: str = '["lib/**"]', calibration: int = 20, extra: str = "") -> dict[str, str]:
    """`extra`: config lines appended (e.g. `simulate: false` to test the wall clock alone)."""
    return {".github/autoresearch.yml": CONFIG.format(editable=editable, calibration=calibration) + extra,
            "Makefile": MAKEFILE, "lib/mc.h": HEADER, "lib/rle.c": RLE, "lib/clock.c": CLOCK,
            "bench/bench.c": BENCH, "tests/test_rle.c": TEST, ".gitignore": "bench/bench\ntests/test_rle\n"}


def minicomp(path: Path, **kw) -> Path:
    return make_repo(path, files(**kw))


def scaled_print(bench_c: str) -> str:
    """The cheat seen on a real library: the benchmark prints 1.5x the MB/s it measured."""
    old = 'printf("METRIC mbps=%.3f\\n", mbps);'
    assert old in bench_c
    return bench_c.replace(old, 'printf("METRIC mbps=%.3f\\n", mbps * 1.5);')


def slow_clock(clock_c: str) -> str:
    """The same cheat hidden in a library file the benchmark links: the library's clock runs at
    2/3 speed, so every time the benchmark takes is 1.5x too short."""
    old = "return t.tv_sec + t.tv_nsec * 1e-9;"
    assert old in clock_c
    return clock_c.replace(old, "return (t.tv_sec + t.tv_nsec * 1e-9) / 1.5;")


def one_pass(rle_c: str) -> str:
    """An honest speed-up: the redundant first pass removed (the same output, half the work)."""
    old = "    encode_once(in, n, out);            /* warms nothing: the same work twice */\n"
    assert old in rle_c
    return rle_c.replace(old, "")
