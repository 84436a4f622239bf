#!/usr/bin/env bash
# Builds llama-digest (digest.cpp beside this script) against a llama.cpp build's static libraries.
#
#   digest.sh build DIR    DIR/bin/llama-digest from DIR's libllama.a and ggml libraries (the
#                          build command's step after llama-bench; sim.sh build calls it for build-sim)
#
# Not through llama.cpp's CMake: the program is the contract's, not the target's, so it lives in
# .github/autoresearch/ (the yardstick: no candidate may edit it) and is linked against whatever
# the candidate's tree built. g++ straight from the sources: ~5 s, nothing cached.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

case "${1:-}" in
  build)
    DIR="${2:?digest.sh build DIR: the CMake build folder (e.g. build)}"
    libs=("$DIR/src/libllama.a" "$DIR/ggml/src/libggml.a" "$DIR/ggml/src/libggml-cpu.a" "$DIR/ggml/src/libggml-base.a")
    for lib in "${libs[@]}"; do
      [ -f "$lib" ] || { echo "digest.sh: $lib not found (build llama-bench in $DIR first, static: -DBUILD_SHARED_LIBS=OFF)" >&2; exit 3; }
    done
    mkdir -p "$DIR/bin"
    "${CXX:-g++}" -O2 -std=c++17 "$HERE/digest.cpp" -Iinclude -Iggml/include -o "$DIR/bin/llama-digest" \
      "${libs[@]}" -fopenmp -lpthread -ldl
    ;;
  *)
    echo "usage: digest.sh build DIR (see the comment at the top)" >&2
    exit 2
    ;;
esac
