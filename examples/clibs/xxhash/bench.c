/* autoresearch contract for xxHash (as python-xxhash's sdist vendors it in deps/xxhash/).
 * Usage: bench [keys] [rounds]. Hashes `keys` keys of 1..256 bytes (sizes and bytes drawn from
 * AUTORESEARCH_SEED) with XXH3_64bits, XXH64 and XXH32, `rounds` times, plus one 1 MiB buffer;
 * prints METRIC lines and a DIGEST of all the hashes (the same for every correct build). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "xxhash/xxhash.h"

static uint64_t rng;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {
    size_t keys = argc > 1 ? strtoul(argv[1], 0, 10) : 200000;
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    const char *seed = getenv("AUTORESEARCH_SEED");
    rng = 0x9E3779B97F4A7C15ull ^ (seed ? strtoull(seed, 0, 10) : 1);
    size_t pool = keys * 16 + 256;
    unsigned char *data = malloc(pool);
    for (size_t i = 0; i < pool; i++) data[i] = (unsigned char)(next() >> 24);
    size_t *off = malloc(keys * sizeof *off), *len = malloc(keys * sizeof *len);
    for (size_t k = 0; k < keys; k++) { len[k] = 1 + next() % 256; off[k] = next() % (pool - 256); }
    uint64_t acc = 0;
    double t3 = 0, t64 = 0, t32 = 0;
    for (int r = 0; r < rounds; r++) {
        double a = now();
        for (size_t k = 0; k < keys; k++) acc += XXH3_64bits(data + off[k], len[k]);
        double b = now();
        for (size_t k = 0; k < keys; k++) acc ^= XXH64(data + off[k], len[k], r);
        double c = now();
        for (size_t k = 0; k < keys; k++) acc += XXH32(data + off[k], len[k], r);
        double d = now();
        t3 += b - a; t64 += c - b; t32 += d - c;
    }
    acc ^= XXH3_64bits(data, pool < (1u << 20) ? pool : (1u << 20));
    double n = (double)keys * rounds;
    printf("METRIC xxh3_mhps=%.3f\n", n / t3 / 1e6);
    printf("METRIC xxh64_mhps=%.3f\n", n / t64 / 1e6);
    printf("METRIC xxh32_mhps=%.3f\n", n / t32 / 1e6);
    printf("DIGEST hashes=%016llx\n", (unsigned long long)acc);
    return 0;
}
