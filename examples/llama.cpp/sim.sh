#!/usr/bin/env bash
# The deterministic yardstick's side of the llama.cpp contract (autoresearch.yml `simulate:`).
#
#   sim.sh build   (the build command's last step) builds build-sim/bin/llama-digest (digest.sh) for
#                  Valgrind, only when AUTORESEARCH_SIM_MODEL is set; otherwise it does nothing
#   sim.sh run     (simulate.command) one llama-digest process on the reduced model, which
#                  autoresearch runs once per arm under cachegrind and counts: it decodes a prompt
#                  (or generates tokens) and prints DIGEST logits=..., the bits of every logit, which
#                  must equal the baseline's (same AUTORESEARCH_SEED): the work that
#                  is counted is the work that is checked, in one process, so a candidate cannot
#                  be fast where it is counted and correct where it is checked
#   sim.sh checks OP...  (the checks' first step) test-backend-ops of build-sim on these ops, only
#                  when AUTORESEARCH_SIM_MODEL is set: the yardstick counts build-sim, so its AVX2 (arm64: dotprod)
#                  kernels must pass the checks too, or a candidate could skip work on the AVX2 path
#                  alone (`#if !defined(__AVX512F__)`), be counted as faster and never be checked
#
# Why a build of its own: the measured build is -march=native, and on an AVX-512 machine its code
# uses AVX-512 everywhere (the compiler vectorises generic loops with it too); Valgrind 3.19 has no
# AVX-512 and stops such a binary with SIGILL. build-sim is the same tree with ggml's AVX2 switches
# (AVX, AVX2, FMA, F16C, BMI2; no AVX-512, no AVX-VNNI), which Valgrind runs, so the yardstick
# counts the AVX2 path of every kernel: a gain only the 512-bit path has is invisible to it, which
# is why the config says `separate_build: true` (such a win is then discarded as unseen, never kept
# and never called invalid). The AVX2 paths are those an AVX2-only machine runs.
#
# On arm64 the copy is -march=armv8.2-a+dotprod: Valgrind decodes SDOT/UDOT from 3.23 on, but even
# 3.27 stops at the int8 matrix multiply (SMMLA, i8mm) and at fp16 vector arithmetic (FMLA .8h)
# with SIGILL (measured under qemu-aarch64, 2026-12-03). So it counts the Q4_0/Q8_0 dot-product
# kernels (the 4x4 repacked GEMM/GEMV) that Neoverse N1 (Graviton 2) and Ampere Altra cores run,
# with f16 arithmetic through f32 conversions; the i8mm kernels of newer cores are not counted
# (again `separate_build`). Before configuring, a probe checks that the installed Valgrind runs an
# SDOT; an older one (Debian 12's 3.19) is refused with that reason.
#
# Variables (the config's sandbox.env passes them):
#   AUTORESEARCH_SIM_MODEL   the reduced model (e.g. 2 layers of the benchmark model's shape)
#   AUTORESEARCH_SIM_PROMPT  prompt tokens (default 64: one Q tile of the flash-attention path, and
#                            13-30 s per arm under cachegrind for a 2-layer Qwen3 shape)
#   AUTORESEARCH_SIM_GEN     generated tokens instead of a prompt (e.g. 16, for a config whose primary
#                            metric is tg128: one token at a time, the matrix-vector path, after a
#                            one-token prompt); default 0
#   AUTORESEARCH_SEED        the token ids (autoresearch sets it; both arms get the same)
#   AUTORESEARCH_FA          -fa, as for bench.sh (default auto)
#   AUTORESEARCH_CCACHE_DIR  the ccache directory, as for the build
# One thread always: ggml's thread pool spins while it waits, and under Valgrind (which runs threads
# one at a time) the spin count would differ from run to run; one thread counts the same every time.
set -euo pipefail

BIN=build-sim/bin/llama-digest
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ARM_ARCH=armv8.2-a+dotprod

# Does the installed Valgrind run the one instruction beyond plain NEON the arm64 copy is built for?
# (Valgrind's arm64 decoder learned SDOT in 3.23; an older one would stop every experiment's
# simulated run with SIGILL, after the builds.) Exits 3 with the reason when it does not.
arm_probe() {
  local d why="" rc=0
  d="$(mktemp -d)"
  printf '%s\n' '#include <arm_neon.h>' \
    'int main(void) { volatile int8_t a = 3; int32x4_t s = vdotq_s32(vdupq_n_s32(1), vdupq_n_s8(a), vdupq_n_s8(a));' \
    '  return vgetq_lane_s32(s, 0) == 37 ? 0 : 1; }' > "$d/sdot.c"
  if ! command -v valgrind > /dev/null; then
    why="Valgrind is not installed"
  elif ! "${CC:-cc}" -O1 -march="$ARM_ARCH" "$d/sdot.c" -o "$d/sdot" 2> "$d/cc.log"; then
    why="the compiler cannot build for -march=$ARM_ARCH: $(head -c 300 "$d/cc.log")"
  else
    # in a shell of its own, so that its "Illegal instruction" lands in the log, not on our stderr
    bash -c 'valgrind --tool=none "$1"; exit $?' _ "$d/sdot" > "$d/vg.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || why="$(valgrind --version 2>/dev/null) cannot run the dot-product instruction (SDOT) the copy is built with, which it decodes from 3.23 on ($(grep -m1 -o 'unhandled instruction.*' "$d/vg.log" || echo "exit status $rc"))"
  fi
  rm -rf "$d"
  [ -z "$why" ] && return 0
  echo "sim.sh: the arm64 yardstick copy (-march=$ARM_ARCH) cannot be counted here: $why; install Valgrind 3.23 or newer, or unset AUTORESEARCH_SIM_MODEL and remove simulate: from the config (wall-clock pairs decide there)" >&2
  exit 3
}

case "${1:-}" in
  build)
    [ -n "${AUTORESEARCH_SIM_MODEL:-}" ] || exit 0
    case "$(uname -m)" in
      x86_64)
        off=(-DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF
             -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF)
        isa=("${off[@]}" -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON) ;;
      aarch64|arm64)
        arm_probe
        isa=(-DGGML_CPU_ARM_ARCH="$ARM_ARCH") ;;
      *)
        echo "sim.sh: the yardstick's copy is defined for x86-64 (AVX2) and arm64 ($ARM_ARCH), not $(uname -m): unset AUTORESEARCH_SIM_MODEL and remove simulate: from the config (wall-clock pairs decide there)" >&2
        exit 3 ;;
    esac
    export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
    export CCACHE_DIR="${AUTORESEARCH_CCACHE_DIR:-$HOME/.cache/autoresearch/ccache}"
    # -DCMAKE_C_FLAGS= explicitly: no flag of the environment (CFLAGS) changes what is counted
    cmake -S . -B build-sim -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF "${isa[@]}" \
      -DCMAKE_C_FLAGS= -DCMAKE_CXX_FLAGS= \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF \
      -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > /dev/null
    cmake --build build-sim -j 2 --target llama      # the libraries llama-digest links (not llama-bench's tools)
    bash "$HERE/digest.sh" build build-sim
    ;;
  run)
    MODEL="${AUTORESEARCH_SIM_MODEL:-}"
    [ -n "$MODEL" ] || { echo "sim.sh: AUTORESEARCH_SIM_MODEL is not set (the reduced model for simulate:)" >&2; exit 3; }
    [ -f "$MODEL" ] || { echo "sim.sh: model $MODEL not found (AUTORESEARCH_SIM_MODEL)" >&2; exit 3; }
    [ -x "$BIN" ] || { echo "sim.sh: $BIN not found: the build runs 'sim.sh build' only when AUTORESEARCH_SIM_MODEL is set" >&2; exit 3; }
    PROMPT="${AUTORESEARCH_SIM_PROMPT:-64}" GEN="${AUTORESEARCH_SIM_GEN:-0}"
    [[ "$PROMPT" =~ ^[1-9][0-9]*$ ]] || { echo "sim.sh: AUTORESEARCH_SIM_PROMPT must be a positive number (got '$PROMPT')" >&2; exit 3; }
    [[ "$GEN" =~ ^[0-9]+$ ]] || { echo "sim.sh: AUTORESEARCH_SIM_GEN must be a number of tokens (got '$GEN')" >&2; exit 3; }
    SEED="${AUTORESEARCH_SEED:-1}"
    [[ "$SEED" =~ ^[0-9]+$ ]] || { echo "sim.sh: AUTORESEARCH_SEED must be a number (got '$SEED')" >&2; exit 3; }
    [ "$GEN" -gt 0 ] && PROMPT=1      # generation: one prompt token, then GEN tokens one at a time
    case "${AUTORESEARCH_FA:-auto}" in on) fa=1 ;; off) fa=0 ;; *) fa=-1 ;; esac
    exec "$BIN" "$MODEL" "$SEED" "$PROMPT" "$GEN" 1 "$fa"
    ;;
  checks)
    shift
    [ -n "${AUTORESEARCH_SIM_MODEL:-}" ] || exit 0
    [ $# -gt 0 ] || { echo "sim.sh: checks needs the test-backend-ops ops to run (e.g. SOFT_MAX RMS_NORM)" >&2; exit 2; }
    export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
    export CCACHE_DIR="${AUTORESEARCH_CCACHE_DIR:-$HOME/.cache/autoresearch/ccache}"
    cmake --build build-sim -j 2 --target test-backend-ops > /dev/null
    set -o pipefail
    for op in "$@"; do
      echo "== build-sim (the yardstick's copy): $op"
      build-sim/bin/test-backend-ops test -b CPU -o "$op" 2>&1 | tail -n 3
    done
    ;;
  *)
    echo "usage: sim.sh build|run|checks OP... (see the comment at the top)" >&2
    exit 2
    ;;
esac
