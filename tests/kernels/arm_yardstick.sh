#!/usr/bin/env bash
# The llama.cpp example's arm64 yardstick (examples/llama.cpp/sim.sh), exercised on an x86-64 Debian
# host: Debian's arm64 Valgrind packages run under qemu-aarch64-static, sim.sh builds its copy posing
# as an arm64 machine (a cross compiler), and cachegrind counts llama-digest with simulate:'s options.
# Slow (one counted pp64 run of a 2-layer model: ~6 min under qemu, ~15 s on a real arm64 core), so
# it is a script, not a test. Each step prints what it found; nothing here decides a verdict.
#
#   arm_yardstick.sh setup             apt: cross compilers, qemu-user-static; the arm64 Valgrind of
#                                      Debian 12 (3.19) and Debian 13 (3.24), unpacked into $DIR
#   arm_yardstick.sh probe             which instructions each Valgrind runs (SDOT, SMMLA, fp16 FMA, ...)
#                                      and whether its vector FMA rounds once, as the hardware does
#   arm_yardstick.sh build TREE        `sim.sh build` in a llama.cpp tree, as on arm64 (VALGRIND=old
#                                      shows its refusal)
#   arm_yardstick.sh count TREE MODEL [PROMPT [GEN]]
#                                      one cachegrind run of TREE/build-sim/bin/llama-digest (sim.sh
#                                      run's arguments, seed 1): its DIGEST and METRIC simulated cycles
#
# DIR (default ~/.cache/autoresearch/arm-yardstick) holds the unpacked packages and the stand-ins;
# VALGRIND=new|old picks Debian 13's or Debian 12's (default new).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DIR="${DIR:-$HOME/.cache/autoresearch/arm-yardstick}"
SYSROOT=/usr/aarch64-linux-gnu          # the cross toolchain's libc, libstdc++ and libgomp
MIRROR=http://deb.debian.org/debian
declare -A SUITE=([old]=bookworm [new]=trixie)
vg_dir() { echo "$DIR/valgrind-${SUITE[$1]}"; }

need_setup() {
  [ -x "$DIR/shim/valgrind" ] && [ -d "$(vg_dir new)" ] || { echo "arm_yardstick.sh: run '$0 setup' first" >&2; exit 3; }
}

setup() {
  apt-get install -y -q gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static > /dev/null
  mkdir -p "$DIR/shim"
  for which in old new; do
    local suite="${SUITE[$which]}" file
    # the package's current file in that suite, from the suite's own index
    file="$(curl -fsS -m 120 "$MIRROR/dists/$suite/main/binary-arm64/Packages.xz" | xz -d |
            awk '/^Package: valgrind$/{p=1} p&&/^Filename:/{print $2; p=0}')"   # reads to the end: no SIGPIPE
    [ -n "$file" ] || { echo "arm_yardstick.sh: no valgrind package for arm64 in $suite" >&2; exit 3; }
    curl -fsS -m 300 -o "$DIR/${file##*/}" "$MIRROR/$file"
    rm -rf "$(vg_dir "$which")" && dpkg-deb -x "$DIR/${file##*/}" "$(vg_dir "$which")"
    echo "$suite: ${file##*/}"
  done
  # `uname -m` says aarch64 to sim.sh; `cc` is the cross compiler (sim.sh's probe); `valgrind` runs
  # the chosen Valgrind's tool binary under qemu (its launcher would exec a second arm64 program,
  # which needs binfmt_misc; calling the tool with VALGRIND_LAUNCHER set does not)
  printf '%s\n' '#!/bin/sh' '[ "$1" = -m ] && { echo aarch64; exit 0; }' 'exec /usr/bin/uname "$@"' > "$DIR/shim/uname"
  printf '%s\n' '#!/bin/sh' 'exec aarch64-linux-gnu-gcc "$@"' > "$DIR/shim/cc"
  cat > "$DIR/shim/valgrind" <<EOF
#!/bin/sh
vg="$DIR/valgrind-\${VALGRIND_SUITE:-trixie}/usr"
tool=memcheck
for a in "\$@"; do case "\$a" in --tool=*) tool=\${a#--tool=} ;; --version) tool=none ;; esac; done
VALGRIND_LAUNCHER="\$vg/bin/valgrind" VALGRIND_LIB="\$vg/libexec/valgrind" \\
  exec qemu-aarch64-static -L $SYSROOT "\$vg/libexec/valgrind/\$tool-arm64-linux" "\$@"
EOF
  chmod +x "$DIR/shim/"*
  cat > "$DIR/aarch64.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH $SYSROOT)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
EOF
}

probe() {
  need_setup
  local d
  d="$(mktemp -d)"
  cat > "$d/probe.c" <<'EOF'
#include <arm_neon.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    volatile int8_t k = 3; volatile float h = 1.5f;
    int8x16_t a = vdupq_n_s8(k), b = vdupq_n_s8(k - 7);
    int32x4_t s = vdupq_n_s32(0);
    if (!strcmp(argv[1], "neon-smull")) s = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    else if (!strcmp(argv[1], "sdot")) s = vdotq_s32(s, a, b);
    else if (!strcmp(argv[1], "sdot-lane")) s = vdotq_laneq_s32(s, a, b, 1);
    else if (!strcmp(argv[1], "smmla")) s = vmmlaq_s32(s, a, b);
    else if (!strcmp(argv[1], "fp16-convert")) s = vdupq_n_s32((int) (vgetq_lane_f32(vcvt_f32_f16(vcvt_f16_f32(vdupq_n_f32(h))), 0) * 100));
    else if (!strcmp(argv[1], "fp16-fma")) { float16x8_t x = vdupq_n_f16(h); s = vdupq_n_s32((int) (vgetq_lane_f16(vfmaq_f16(x, x, x), 0) * 100)); }
    else if (!strcmp(argv[1], "f32-fma-rounding")) {   /* 1 if the vector FMA rounds once (fused), 0 if twice */
        volatile float x = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
        s = vdupq_n_s32((int) (vgetq_lane_f32(vfmaq_f32(vdupq_n_f32(c), vdupq_n_f32(x), vdupq_n_f32(x)), 0) * 0x1p24f));
    }
    else return 2;
    printf("%d\n", vgetq_lane_s32(s, 0));
    return 0;
}
EOF
  aarch64-linux-gnu-gcc -O1 -march=armv8.2-a+dotprod+i8mm+fp16 "$d/probe.c" -o "$d/probe"
  for which in old new; do
    local version
    version="$(VALGRIND_SUITE="${SUITE[$which]}" "$DIR/shim/valgrind" --version)"
    for insn in neon-smull sdot sdot-lane smmla fp16-convert fp16-fma f32-fma-rounding; do
      local native under
      native="$(qemu-aarch64-static -L "$SYSROOT" "$d/probe" "$insn")"
      under="$(VALGRIND_SUITE="${SUITE[$which]}" bash -c '"$0" --tool=none "$1" "$2"; exit $?' \
               "$DIR/shim/valgrind" "$d/probe" "$insn" 2>&1 | grep -o -m1 '^-\?[0-9]\+$\|unhandled instruction 0x[0-9A-F]*' || true)"
      echo "$version $insn: native $native, under Valgrind ${under:-no output (SIGILL)}"
    done
  done
  rm -rf "$d"
}

build() {
  need_setup
  local tree="${1:?build TREE}"
  local suite="${SUITE[${VALGRIND:-new}]}"
  cd "$tree"
  VALGRIND_SUITE="$suite" PATH="$DIR/shim:$PATH" CMAKE_TOOLCHAIN_FILE="$DIR/aarch64.cmake" \
    CXX=aarch64-linux-gnu-g++ AUTORESEARCH_SIM_MODEL=/dev/null AUTORESEARCH_CCACHE_DIR="$DIR/ccache" \
    bash "$ROOT/examples/llama.cpp/sim.sh" build
  aarch64-linux-gnu-readelf -h build-sim/bin/llama-digest | grep Machine
}

count() {
  need_setup
  local tree="${1:?count TREE MODEL}" model="${2:?count TREE MODEL}" prompt="${3:-64}" gen="${4:-0}" out
  [ "$gen" -gt 0 ] && prompt=1      # as sim.sh run: one prompt token, then GEN
  out="$(mktemp -d)"
  # simulate:'s cache geometry, from the code that counts (jobs/measure/simulate.py); split into options on purpose
  caches="$(PYTHONPATH="$ROOT" python3 -c 'from jobs.measure.simulate import CACHES; print(" ".join(CACHES))')"
  # shellcheck disable=SC2086
  VALGRIND_SUITE="${SUITE[${VALGRIND:-new}]}" "$DIR/shim/valgrind" --tool=cachegrind --cache-sim=yes \
    --branch-sim=no $caches --vgdb=no \
    --cachegrind-out-file="$out/cg.out" "$tree/build-sim/bin/llama-digest" "$model" 1 "$prompt" "$gen" 1 -1 \
    > "$out/run.log" 2>&1 || { tail -n 20 "$out/run.log"; exit 1; }
  grep '^DIGEST ' "$out/run.log"
  PYTHONPATH="$ROOT" python3 - "$out/cg.out" <<'EOF'
import sys
from collections import Counter
from pathlib import Path
from jobs.research.cgformat import costs
from jobs.measure.simulate import parse_cachegrind
text = Path(sys.argv[1]).read_text()
counts = parse_cachegrind(text)
print(f"METRIC sim_cycles={counts.cycles}")
print(f"METRIC sim_ir={counts.get('Ir')}")
by_fn = Counter()       # where the instructions went, by function
for cost in costs(text):
    by_fn[cost.fn] += cost.costs.get("Ir", 0)
for name, ir in by_fn.most_common(5):
    print(f"  {100 * ir / counts.get('Ir'):5.1f}% of Ir  {name[:100]}")
EOF
  rm -rf "$out"
}

case "${1:-}" in
  setup) setup ;;
  probe) probe ;;
  build) shift; build "$@" ;;
  count) shift; count "$@" ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
