// For a repacked-kernel harness (q4_0_unsigned_nibble_harness.cpp; the next one includes it too):
// the kernel cut out of the tree as it is (orig_kernel.inc) and with the recipe applied
// (patched_kernel.inc, both written by the test) in namespaces of their own, and the harness's
// random numbers. Included after the stand-ins for the ggml definitions the kernels use.
#pragma once
#include <cstdint>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
namespace orig {
#include "orig_kernel.inc"
}
namespace patched {
#include "patched_kernel.inc"
}
#pragma GCC diagnostic pop

static uint32_t rng = 20261202;
static uint32_t next_u32() {      // xorshift32: the same cases on every run and machine
    rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5;
    return rng;
}
