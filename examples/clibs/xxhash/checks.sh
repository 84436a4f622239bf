#!/usr/bin/env bash
# Known answers of xxHash (checks.c: the specification's values for short inputs, and streaming
# against one-shot hashing for every length 0..1024).
set -euo pipefail
cc -O1 -o /tmp/xxh-check checks.c xxhash/xxhash.c
/tmp/xxh-check
