#!/bin/sh
# One invocation = one benchmark sample: after an untimed warm-up, a prompt phase of 512
# tokens in one batch, then 448 tokens generated one at a time with the KV cache (context
# 512..960). Prints METRIC pp_tps, tg_tps and tg_ms_per_tok (tg_tps * tg_ms_per_tok =
# 1000), timed on the process's CPU clock (see driver/main.c).
set -eu
cd "$(dirname "$0")"
if [ ! -x ./tinyllm ]; then
    echo "bench.sh: ./tinyllm not built; run make first" >&2
    exit 1
fi
exec ./tinyllm bench -p 512 -n 448
