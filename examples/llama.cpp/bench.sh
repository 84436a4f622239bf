#!/usr/bin/env bash
# One benchmark sample for autoresearch: ONE llama-bench process, two METRIC lines, then what
# the build computes (llama-digest, built by digest.sh beside llama-bench) as a DIGEST line.
#   METRIC pp512=<tokens/s>   prompt processing, 512-token prompt
#   METRIC tg128=<tokens/s>   generation, 128 tokens
#   DIGEST logits=<hex>       every logit of 64 prompt and 4 generated positions (llama-digest,
#                             exact bits), inputs drawn from $AUTORESEARCH_SEED (both builds of a
#                             pair get the same seed, and autoresearch requires equal digests): a
#                             candidate that skips work in a kernel the checks do not reach (the
#                             repacked Q4_0 matrix multiply) computes other logits and is invalid
# Model: $AUTORESEARCH_MODEL (default: the synthetic 4-layer TinyLlama-shaped Q4_0 GGUF that
# autoresearch's tests/kernels/llama_ab.py writes). Threads: $AUTORESEARCH_THREADS (default 1:
# on a shared 2-core machine -t 2 makes the samples bimodal when a neighbour takes a core).
# Flash attention: $AUTORESEARCH_FA = on|off|auto (default auto, llama-bench's own default,
# which turns it on for the CPU backend: the tiled FA path runs for the prompt, SOFT_MAX does not).
# Generation: $AUTORESEARCH_TG = on|off (default on); off runs the prompt only (-n 0) and prints
# no tg128 line, so a config that measures pp512 alone gets twice the samples per minute (its
# `metrics` must then not list tg128: only a missing primary metric is an error per sample).
set -euo pipefail

MODEL="${AUTORESEARCH_MODEL:-$HOME/.cache/autoresearch/models/synthetic-tinyllama-4L-q4_0.gguf}"
THREADS="${AUTORESEARCH_THREADS:-1}"
FA="${AUTORESEARCH_FA:-auto}"
BENCH="${AUTORESEARCH_LLAMA_BENCH:-build/bin/llama-bench}"
DIGEST_BIN="$(dirname "$BENCH")/llama-digest"
SEED="${AUTORESEARCH_SEED:-1}"
case "${AUTORESEARCH_TG:-on}" in
  on) GEN=128 ;;
  off) GEN=0 ;;
  *) echo "bench.sh: AUTORESEARCH_TG must be on or off (got '${AUTORESEARCH_TG}')" >&2; exit 3 ;;
esac

[ -x "$BENCH" ] || { echo "bench.sh: $BENCH not found or not executable (did the build run?)" >&2; exit 3; }
[ -x "$DIGEST_BIN" ] || { echo "bench.sh: $DIGEST_BIN not found or not executable (the build's 'digest.sh build' step makes it)" >&2; exit 3; }
[ -f "$MODEL" ] || { echo "bench.sh: model $MODEL not found (set AUTORESEARCH_MODEL)" >&2; exit 3; }
[[ "$SEED" =~ ^[0-9]+$ ]] || { echo "bench.sh: AUTORESEARCH_SEED must be a number (got '$SEED')" >&2; exit 3; }

out="$("$BENCH" -m "$MODEL" -p 512 -n "$GEN" -r 1 -o json -t "$THREADS" -fa "$FA")" || {
  echo "bench.sh: llama-bench failed (exit $?)" >&2; exit 4; }

# The digest after the timed process, in a process of its own: llama-bench's clock never sees it.
# Same threads and flash-attention setting as the benchmark, so the same kernels and splits run.
case "$FA" in on) fa=1 ;; off) fa=0 ;; *) fa=-1 ;; esac
digest="$("$DIGEST_BIN" "$MODEL" "$SEED" 64 4 "$THREADS" "$fa")" || {
  echo "bench.sh: llama-digest failed (exit $?)" >&2; exit 4; }

# llama-bench -o json prints one object per test: the pp512 test has n_prompt=512, n_gen=0;
# the tg128 test has n_prompt=0, n_gen=128. Pick each by those fields, never by position or by
# the first "avg_ts" in the text (the study's parser read the wrong test: 14 vs 52 t/s).
python3 - "$out" "$GEN" <<'PY'
import json, math, sys
try:
    rows = json.loads(sys.argv[1])
except ValueError as e:
    sys.exit(f"bench.sh: llama-bench output is not JSON: {e}")
if not isinstance(rows, list):
    sys.exit("bench.sh: llama-bench JSON is not a list of tests")
want = {"pp512": (512, 0), "tg128": (0, 128)} if sys.argv[2] != "0" else {"pp512": (512, 0)}
found = {}
for row in rows:
    if not isinstance(row, dict):
        continue
    key = (row.get("n_prompt"), row.get("n_gen"))
    for name, shape in want.items():
        if key == shape:
            if name in found:
                sys.exit(f"bench.sh: two {name} results in llama-bench JSON")
            ts = row.get("avg_ts")
            if not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts <= 0:
                sys.exit(f"bench.sh: {name} has no valid avg_ts (got {ts!r})")
            found[name] = float(ts)
missing = [n for n in want if n not in found]
if missing:
    sys.exit(f"bench.sh: llama-bench JSON lacks {', '.join(missing)} "
             f"(tests seen: {[(r.get('n_prompt'), r.get('n_gen')) for r in rows if isinstance(r, dict)]})")
for name in want:
    print(f"METRIC {name}={found[name]:.3f}")
PY
printf '%s\n' "$digest" | grep -E '^DIGEST logits=[0-9a-f]{16}$' || {
  echo "bench.sh: llama-digest printed no DIGEST line (got: ${digest:0:200})" >&2; exit 4; }
