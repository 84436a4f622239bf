/* autoresearch contract for lz4 (the library as python-lz4's sdist vendors it in lz4libs/).
 * Usage: bench [bytes] [rounds]. Generates a text-like corpus from AUTORESEARCH_SEED, then
 * compresses it with LZ4_compress_default and decompresses it `rounds` times; prints METRIC
 * lines (MB/s of input) and a DIGEST of the compressed bytes. Exit 1 if a round trip differs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lz4libs/lz4.h"

static uint64_t rng;
static uint32_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)rng; }

static void corpus(char *buf, size_t n) {
    static const char *words[] = {"the", "of", "and", "compression", "block", "stream", "data", "fast",
                                  "ratio", "dictionary", "entropy", "match", "literal", "offset", "a", "is",
                                  "to", "in", "that", "for", "buffer", "length", "frame", "hash", "table"};
    size_t lens[25], i = 0;
    for (int k = 0; k < 25; k++) lens[k] = strlen(words[k]);
    while (i < n) {
        uint32_t pick = next() % 25;
        const char *w = words[pick];
        size_t l = lens[pick];
        for (size_t k = 0; k < l && i < n; k++) buf[i++] = w[k];
        if (i < n) buf[i++] = (next() % 13 == 0) ? '\n' : ' ';
        if (next() % 50 == 0) for (int k = 0; k < 6 && i < n; k++) buf[i++] = (char)('0' + next() % 10);
    }
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], 0, 10) : (8u << 20);
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    const char *seed = getenv("AUTORESEARCH_SEED");
    rng = 0x9E3779B97F4A7C15ull ^ (seed ? strtoull(seed, 0, 10) : 1);
    char *src = malloc(n), *dst = malloc(LZ4_compressBound((int)n)), *back = malloc(n);
    corpus(src, n);
    int csize = 0;
    double tc = 0, td = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        csize = LZ4_compress_default(src, dst, (int)n, LZ4_compressBound((int)n));
        double t1 = now();
        int d = LZ4_decompress_safe(dst, back, csize, (int)n);
        double t2 = now();
        if (csize <= 0 || d != (int)n || memcmp(src, back, n)) { fprintf(stderr, "round trip failed\n"); return 1; }
        tc += t1 - t0; td += t2 - t1;
    }
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < csize; i++) h = (h ^ (unsigned char)dst[i]) * 1099511628211ull;
    printf("METRIC compress_mbps=%.3f\n", n * (double)rounds / tc / 1e6);
    printf("METRIC decompress_mbps=%.3f\n", n * (double)rounds / td / 1e6);
    printf("METRIC ratio=%.4f\n", (double)n / csize);
    printf("DIGEST compressed=%016llx\n", (unsigned long long)h);
    return 0;
}
