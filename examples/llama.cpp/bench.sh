#!/usr/bin/env bash
# One benchmark sample for autoresearch: ONE llama-digest --bench process (digest.cpp, the contract's
# own program, built by digest.sh against the tree's libraries), which runs llama-bench's tests the
# way llama-bench does and digests exactly what it timed:
#   METRIC pp512=<tokens/s>   DIGEST pp512=<hex>   prompt processing, 512-token prompt
#   METRIC tg128=<tokens/s>   DIGEST tg128=<hex>   generation, 128 tokens
# Each DIGEST is the exact bits of the logits the timed run computed, from inputs drawn from
# $AUTORESEARCH_SEED (both builds of a pair get the same seed, and autoresearch requires equal
# digests): a candidate that skips work (in a kernel test-backend-ops does not reach, such as the
# repacked Q4_0 matrix multiply, or only when it recognises the benchmark) computes other logits
# and is invalid. llama-bench itself is not run: it checks nothing it computes, so a candidate that
# recognised it could be timed as faster there and digested as correct in another process.
# Model: $AUTORESEARCH_MODEL (default: the synthetic 4-layer TinyLlama-shaped Q4_0 GGUF that
# autoresearch's tests/kernels/llama_ab.py writes). Threads: $AUTORESEARCH_THREADS (default 1:
# on a shared 2-core machine -t 2 makes the samples bimodal when a neighbour takes a core).
# Flash attention: $AUTORESEARCH_FA = on|off|auto (default auto, llama-bench's own default,
# which turns it on for the CPU backend: the tiled FA path runs for the prompt, SOFT_MAX does not).
# Generation: $AUTORESEARCH_TG = on|off (default on); off runs the prompt only and prints no tg128
# lines, so a config that measures pp512 alone gets twice the samples per minute (its `metrics`
# must then not list tg128: only a missing primary metric is an error per sample).
set -euo pipefail

MODEL="${AUTORESEARCH_MODEL:-$HOME/.cache/autoresearch/models/synthetic-tinyllama-4L-q4_0.gguf}"
THREADS="${AUTORESEARCH_THREADS:-1}"
FA="${AUTORESEARCH_FA:-auto}"
BIN="${AUTORESEARCH_LLAMA_DIGEST:-build/bin/llama-digest}"
SEED="${AUTORESEARCH_SEED:-1}"
case "${AUTORESEARCH_TG:-on}" in
  on) GEN=128 ;;
  off) GEN=0 ;;
  *) echo "bench.sh: AUTORESEARCH_TG must be on or off (got '${AUTORESEARCH_TG}')" >&2; exit 3 ;;
esac
case "$FA" in
  on) fa=1 ;;
  off) fa=0 ;;
  auto) fa=-1 ;;
  *) echo "bench.sh: AUTORESEARCH_FA must be on, off or auto (got '$FA')" >&2; exit 3 ;;
esac

[ -x "$BIN" ] || { echo "bench.sh: $BIN not found or not executable (the build's 'digest.sh build' step makes it)" >&2; exit 3; }
[ -f "$MODEL" ] || { echo "bench.sh: model $MODEL not found (set AUTORESEARCH_MODEL)" >&2; exit 3; }
[[ "$SEED" =~ ^[0-9]+$ ]] || { echo "bench.sh: AUTORESEARCH_SEED must be a number (got '$SEED')" >&2; exit 3; }
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: AUTORESEARCH_THREADS must be a positive number (got '$THREADS')" >&2; exit 3; }

out="$("$BIN" --bench "$MODEL" "$SEED" 512 "$GEN" "$THREADS" "$fa")" || {
  echo "bench.sh: llama-digest --bench failed (exit $?)" >&2; exit 4; }

# Every test asked for must be there, once, as a METRIC with a positive finite rate and its DIGEST:
# a rate without the digest of what it timed is not a sample.
want="pp512"; [ "$GEN" = 0 ] || want="pp512 tg128"
for name in $want; do
  metric="$(printf '%s\n' "$out" | grep -cE "^METRIC $name=[0-9]+(\.[0-9]+)?$")" || true
  digest="$(printf '%s\n' "$out" | grep -cE "^DIGEST $name=[0-9a-f]{16}$")" || true
  [ "$metric" = 1 ] && [ "$digest" = 1 ] || {
    echo "bench.sh: llama-digest --bench printed $metric METRIC and $digest DIGEST lines for $name, one each expected (got: ${out:0:300})" >&2
    exit 4; }
  rate="$(printf '%s\n' "$out" | sed -n "s/^METRIC $name=//p")"
  awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || { echo "bench.sh: $name rate is $rate tokens/s" >&2; exit 4; }
done
printf '%s\n' "$out" | grep -E '^(METRIC|DIGEST) '
