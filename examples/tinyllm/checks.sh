#!/bin/sh
# Correctness checks: the built ./tinyllm must reproduce the frozen reference
# (./tinyllm_ref, built from ref/, which is never edited) on fixed prompts.
# For each case the program dumps the logits after the prompt and after every greedy
# generation step; the reference recomputes them along the same tokens and requires
#   |logit - ref| <= 1e-4 * max|ref logits of that step|   for every logit,
# and every greedy token to be the reference's argmax (up to the same tolerance).
# Cases cover a short prompt, a prompt whose generation crosses the 256-cell KV padding
# boundary, and a prompt longer than one padding block.
set -eu
cd "$(dirname "$0")"
for bin in ./tinyllm ./tinyllm_ref; do
    if [ ! -x "$bin" ]; then
        echo "checks: $bin not built; run make first" >&2
        exit 1
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
for case in "37 12" "250 20" "300 4"; do
    set -- $case
    if ! ./tinyllm dump -p "$1" -n "$2" > "$tmp/dump"; then
        echo "checks: FAIL: ./tinyllm dump -p $1 -n $2 exited with an error"
        exit 1
    fi
    ./tinyllm_ref verify "$tmp/dump" || exit 1
done
echo "checks: all cases passed"
