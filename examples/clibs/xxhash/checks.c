/* Known-answer tests of xxHash: values from the xxHash specification's reference implementation. */
#include <stdio.h>
#include <string.h>
#include "xxhash/xxhash.h"
static int bad;
static void eq(const char *what, unsigned long long got, unsigned long long want) {
    if (got != want) { printf("%s: got %016llx want %016llx\n", what, got, want); bad = 1; }
}
int main(void) {
    eq("XXH32('')", XXH32("", 0, 0), 0x02CC5D05ull);
    eq("XXH64('')", XXH64("", 0, 0), 0xEF46DB3751D8E999ull);
    eq("XXH3_64bits('')", XXH3_64bits("", 0), 0x2D06800538D394C2ull);
    eq("XXH32('a')", XXH32("a", 1, 0), 0x550D7456ull);
    eq("XXH64('a')", XXH64("a", 1, 0), 0xD24EC4F1A98C6E5Bull);
    eq("XXH64('abc')", XXH64("abc", 3, 0), 0x44BC2CF5AD770999ull);
    /* every length 0..1024 of a fixed buffer: one-shot and streaming agree */
    static unsigned char buf[1025];
    for (int i = 0; i < 1025; i++) buf[i] = (unsigned char)(i * 131 + 7);
    for (size_t n = 0; n <= 1024; n++) {
        XXH3_state_t *s = XXH3_createState();
        XXH3_64bits_reset(s);
        XXH3_64bits_update(s, buf, n / 2);
        XXH3_64bits_update(s, buf + n / 2, n - n / 2);
        eq("XXH3 stream vs one-shot", XXH3_64bits_digest(s), XXH3_64bits(buf, n));
        XXH3_freeState(s);
        XXH64_state_t *t = XXH64_createState();
        XXH64_reset(t, 5);
        XXH64_update(t, buf, n / 3);
        XXH64_update(t, buf + n / 3, n - n / 3);
        eq("XXH64 stream vs one-shot", XXH64_digest(t), XXH64(buf, n, 5));
        XXH64_freeState(t);
    }
    if (!bad) puts("known answers ok");
    return bad;
}
