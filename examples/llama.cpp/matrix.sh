#!/usr/bin/env bash
# End-to-end runs of the loop on real llama.cpp (issue 14, part 4): `autoresearch run` on the
# llama.cpp that llama-cpp-python vendors, one run per cell = model x threads x primary metric.
#
#   examples/llama.cpp/matrix.sh setup            # target repos + synthetic models (once, ~2 min)
#   examples/llama.cpp/matrix.sh targets          # only the target repos (setup's first half)
#   examples/llama.cpp/matrix.sh cells            # list the cells and their commands
#   examples/llama.cpp/matrix.sh run CELL [ARGS]  # one cell, e.g. qwen3-t1-pp512 (ARGS go to autoresearch run)
#   examples/llama.cpp/matrix.sh all [ARGS]       # every cell, one after the other
#   examples/llama.cpp/matrix.sh publish CELL     # copy a finished cell's staged reports into results/
#   TAG=WORD examples/llama.cpp/matrix.sh publish CELL   # ... as results/<cell>[-sim]-WORD-<isa>/, beside
#                                                 #   an earlier run of the cell instead of replacing it
#   examples/llama.cpp/matrix.sh candidate RECIPE # one recipe's edits as a patch, for
#                                                 #   `run CELL --agent none --candidate $WORK/candidates/RECIPE.patch`
#   examples/llama.cpp/matrix.sh smoke            # the short smoke run (gemma3 4 layers, -t 1, --repeats 3)
#   TOP=2 examples/llama.cpp/matrix.sh run CELL   # research, then only the 2 top-ranked hypotheses (below)
#   SIM=1 examples/llama.cpp/matrix.sh run CELL   # keeps decided by the deterministic yardstick (below);
#                                                 #   staged/published as <cell>-sim-<isa>
#
# Cells: {tinyllama = TinyLlama-1.1B shape, 22 layers; qwen3 = Qwen3-0.6B shape, 28 layers}
#        x {-t 1, -t 2} x {primary pp512, primary tg128}; every run measures both metrics, the
#        primary one decides keep/discard; a third field pp512only (e.g. qwen3-t1-pp512only) measures
#        the prompt alone (AUTORESEARCH_TG=off: about half the time per sample, no tg128 metric).
#        A run stages its reports in $WORK/results/<cell>-<isa>/ (isa: avx512, avx2, neon, ... of
#        this machine), never in the committed folders: `publish CELL` copies a finished run's
#        folder whole into examples/llama.cpp/results/<cell>-<isa>/ (pr.md, research.md,
#        summary.json, hypotheses.json, experiments.jsonl, command.txt), replacing what was there.
#
# Environment: the cache root is $AUTORESEARCH_CACHE_ROOT, else $XDG_CACHE_HOME/autoresearch, else
# ~/.cache/autoresearch (as for the sandbox); WORK (default <cache root>/matrix) holds the target
# repos, run dirs and staged results; LLAMA_TREE=DIR makes the targets from a local llama.cpp tree
# instead of the one llama-cpp-python vendors;
# AUTORESEARCH (default: autoresearch on PATH, else this checkout's .venv/bin/autoresearch);
# AUTORESEARCH_CFLAGS is passed to the build (see autoresearch.yml; on an AMX VM whose AMX path
# crashes set it to "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"). Runs are niced (shared machine).
# SIM=1: the cell runs on a variant of its target whose config declares the example's `simulate:`
# yardstick (sim.sh: an AVX2 copy, on arm64 an armv8.2-a+dotprod one, with llama-digest, one process
# per arm under cachegrind, pp64 on a 2-layer model of the cell's shape, -t 1; tg128 cells generate 16
# tokens instead: AUTORESEARCH_SIM_GEN=16), with AUTORESEARCH_SIM_MODEL set to that model.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${AUTORESEARCH_CACHE_ROOT:-${AUTORESEARCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/autoresearch}}"
export AUTORESEARCH_CACHE_ROOT="$CACHE"     # llama_ab.py's models and the run's sandbox agree on it
# The variables the example's config asks for (sandbox.env): the operator (whoever runs this script)
# allows them, since target code gets a variable only when both ask and allow (jobs/guard/operator.py).
export AUTORESEARCH_SANDBOX_ENV="${AUTORESEARCH_SANDBOX_ENV:-AUTORESEARCH_MODEL,AUTORESEARCH_THREADS,AUTORESEARCH_FA,AUTORESEARCH_TG,AUTORESEARCH_LLAMA_DIGEST,AUTORESEARCH_CCACHE_DIR,AUTORESEARCH_CFLAGS,AUTORESEARCH_SIM_MODEL,AUTORESEARCH_SIM_PROMPT,AUTORESEARCH_SIM_GEN}"
WORK="${WORK:-$CACHE/matrix}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
AR="${AUTORESEARCH:-$(command -v autoresearch || echo "$ROOT/.venv/bin/autoresearch")}"
STAGE="$WORK/results"                       # where runs write; `publish` copies into PUBLISHED
PUBLISHED="${RESULTS:-$HERE/results}"

MODELS_DIR="$CACHE/models"
declare -A MODEL=(
  [tinyllama]="$MODELS_DIR/synthetic-tinyllama-22L-q4_0.gguf"
  [qwen3]="$MODELS_DIR/synthetic-qwen3-28L-q4_0.gguf"
  [gemma3-4L]="$MODELS_DIR/synthetic-gemma3-4L-q4_0.gguf"
)
# the yardstick's reduced models (SIM=1): 2 layers of each shape
declare -A SIM_MODEL=(
  [tinyllama]="$MODELS_DIR/synthetic-tinyllama-2L-q4_0.gguf"
  [qwen3]="$MODELS_DIR/synthetic-qwen3-2L-q4_0.gguf"
)
case "${SIM:-}" in ""|1) ;; *) echo "matrix.sh: SIM must be 1 or unset (got '$SIM')" >&2; exit 2 ;; esac
[[ "${TAG:-}" =~ ^([a-z0-9]+(-[a-z0-9]+)*)?$ ]] || {
  echo "matrix.sh: TAG must be lower-case letters, digits and inner dashes (got '$TAG')" >&2; exit 2; }

cells() {
  for m in tinyllama qwen3; do for t in 1 2; do for p in pp512 tg128 pp512only; do echo "$m-t$t-$p"; done; done; done
}

# This machine's widest vector ISA (jobs/measure/machine.py): every results folder's name ends in it.
isa() {
  "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); from jobs.measure.hostfacts import machine_facts; print(machine_facts()["isa"])' "$ROOT"
}

# One line: CPU, ISA flags, kernel, compiler and the load average now.
machine_line() {
  "$PY" -c 'import os, sys; sys.path.insert(0, sys.argv[1]); from jobs.measure.hostfacts import machine_facts; from jobs.measure.machine import one_line
l = os.getloadavg(); print(one_line(machine_facts()) + "; load %.2f %.2f %.2f" % l)' "$ROOT"
}

# The llama.cpp tree the targets are made from: $LLAMA_TREE, else llama-cpp-python's vendored one.
llama_tree() {
  if [ -n "${LLAMA_TREE:-}" ]; then
    [ -f "$LLAMA_TREE/ggml/src/ggml-cpu/ops.cpp" ] || {
      echo "matrix.sh: LLAMA_TREE=$LLAMA_TREE is not a llama.cpp tree (no ggml/src/ggml-cpu/ops.cpp)" >&2; exit 2; }
    (cd "$LLAMA_TREE" && pwd)
  else
    "$PY" "$ROOT/kernels/llama/llama_tree.py"
  fi
}

# A llama.cpp git repo whose committed .github/autoresearch.yml has `primary` as its primary metric.
make_target() {
  local primary="$1" dir="$WORK/target-$1"
  [ -d "$dir/.git" ] && return 0
  local tree
  tree="$(llama_tree)"
  mkdir -p "$dir"
  # everything but the vocab models, docs and media (the GPU backends stay: the gap scan reads them)
  tar -C "$tree" --exclude=./.git --exclude=./models --exclude=./docs --exclude=./media -cf - . | tar -C "$dir" -xf -
  mkdir -p "$dir/.github/autoresearch"
  cp "$HERE/bench.sh" "$HERE/sim.sh" "$HERE/digest.sh" "$HERE/digest.cpp" "$dir/.github/autoresearch/"
  if [ "$primary" = pp512 ]; then
    cp "$HERE/autoresearch.yml" "$dir/.github/autoresearch.yml"
  elif [ "$primary" = pp512only ]; then
    # prompt processing alone: no tg128 metric, and the cell runs bench.sh with AUTORESEARCH_TG=off
    grep -v '{name: tg128, direction: higher, unit: "t/s"}' "$HERE/autoresearch.yml" > "$dir/.github/autoresearch.yml"
    ! grep -q 'name: tg128' "$dir/.github/autoresearch.yml" || {
      echo "matrix.sh: could not drop tg128 from $dir/.github/autoresearch.yml" >&2; exit 2; }
  else
    sed -e 's/{name: pp512, direction: higher, primary: true, unit: "t\/s"}/{name: pp512, direction: higher, unit: "t\/s"}/' \
        -e 's/{name: tg128, direction: higher, unit: "t\/s"}/{name: tg128, direction: higher, primary: true, unit: "t\/s"}/' \
        "$HERE/autoresearch.yml" > "$dir/.github/autoresearch.yml"
    grep -q 'name: tg128, direction: higher, primary: true' "$dir/.github/autoresearch.yml" || {
      echo "matrix.sh: could not make tg128 primary in $dir/.github/autoresearch.yml" >&2; exit 2; }
  fi
  git -C "$dir" init -q -b main
  git -C "$dir" add -A
  git -C "$dir" -c user.email=matrix@autoresearch -c user.name=matrix commit -qm "llama.cpp (${LLAMA_TREE:-llama-cpp-python vendor}) + autoresearch contract, primary $primary"
  echo "target $dir"
}

# A variant of target-PRIMARY for TOP=N and/or SIM=1, one commit (so command.txt's "target HEAD"
# line names it), made once: target-PRIMARY[-topN][-sim]. Prints its directory.
# TOP=N: the config tests the N top-ranked hypotheses as an N-experiment family (slot levels
# alpha/N instead of alpha/12) and adds FLASH_ATTN_EXT's tiled cases to the checks (the
# flash-attention recipes rank near the top): what a 2-core machine's time allows for a run with
# research. SIM=1: the config's commented `simulate:` line is switched on (sim.sh).
variant_target() {
  local primary="$1" n="${TOP:-}" base="$WORK/target-$1" dir="$WORK/target-$1"
  [ -z "$n" ] || [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "matrix.sh: TOP=$n is not a positive number of hypotheses" >&2; exit 2; }
  [ -n "$n" ] && dir="$dir-top$n"
  [ -n "${SIM:-}" ] && dir="$dir-sim"
  [ "$dir" = "$base" ] && { echo "$dir"; return 0; }
  [ -d "$dir/.git" ] && { echo "$dir"; return 0; }
  [ -d "$base/.git" ] || { echo "matrix.sh: run '$0 setup' first ($base missing)" >&2; exit 2; }
  git clone -q "$base" "$dir"
  local cfg="$dir/.github/autoresearch.yml" what=()
  if [ -n "$n" ]; then
    sed -i -e "s/^  max_hypotheses: [0-9][0-9]*\$/  max_hypotheses: $n/" \
           -e "s/max_experiments: [0-9][0-9]*,/max_experiments: $n,/" \
           -e 's/^\(  build\/bin\/test-backend-ops test -b CPU -o \$op 2>&1 | tail -n 3 || exit 1; done\)$/\1 \&\&\n  build\/bin\/test-backend-ops test -b CPU -o FLASH_ATTN_EXT -p "nb=75,"/' "$cfg"
    grep -q "^  max_hypotheses: $n\$" "$cfg" && grep -q "max_experiments: $n," "$cfg" && grep -q '^  build/bin/test-backend-ops test -b CPU -o FLASH_ATTN_EXT -p "nb=75,"' "$cfg" || {
      rm -rf "$dir"; echo "matrix.sh: could not narrow $cfg to TOP=$n (the example's config changed?)" >&2; exit 2; }
    what+=("the $n top-ranked hypotheses, a $n-experiment family, and FLASH_ATTN_EXT's tiled cases in the checks")
  fi
  if [ -n "${SIM:-}" ]; then
    sed -i -e 's/^# simulate: {/simulate: {/' "$cfg"
    grep -q '^simulate: {command: bash .github/autoresearch/sim.sh run' "$cfg" || {
      rm -rf "$dir"; echo "matrix.sh: could not switch on simulate: in $cfg (the example's config changed?)" >&2; exit 2; }
    what+=("the deterministic yardstick (simulate: sim.sh)")
  fi
  local msg
  msg="$(printf '%s; ' "${what[@]}")"
  git -C "$dir" -c user.email=matrix@autoresearch -c user.name=matrix commit -qam "autoresearch: ${msg%; }"
  echo "$dir"
}

# The example's build (autoresearch.yml) uses cmake, Ninja and ccache; say so before a run fails on it.
need_tools() {
  local missing=()
  for tool in cmake ninja ccache; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "matrix.sh: missing ${missing[*]}; fix: apt-get install cmake ninja-build ccache" >&2
  exit 2
}

targets() {
  make_target pp512
  make_target tg128
  make_target pp512only
}

setup() {
  need_tools
  # the synthetic models are written with llama.cpp's gguf package (the test extra has it); say so
  # before the targets are copied, not in a traceback after
  "$PY" -c 'import gguf' 2>/dev/null || {
    echo "matrix.sh: $PY cannot import gguf, which writes the synthetic models; fix: pip install -e '.[test]' in $ROOT (or pip install 'gguf>=0.10,<1')" >&2; exit 2; }
  targets
  "$PY" - "$ROOT" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/tests/kernels")
import llama_ab
for shape, layers in (("tinyllama", 22), ("qwen3", 28), ("gemma3", 4), ("tinyllama", 2), ("qwen3", 2)):
    print(llama_ab.make_shape(shape, layers))
PY
}

# run_cell NAME MODEL THREADS PRIMARY SIM_MODEL [autoresearch args...]
run_cell() {
  local name="$1${SIM:+-sim}" model="$2" threads="$3" primary="$4" sim_model="$5"
  shift 5
  local suffix
  suffix="$(isa)"
  # the run folder names the TOP variant too: a folder resumes only its own run, and a TOP=3 run of
  # a cell is a run of another target commit than the plain one (the CLI refuses such a folder)
  local target="$WORK/target-$primary" out="$WORK/runs/$name${TOP:+-top$TOP}-$suffix" dest="$STAGE/$name-$suffix"
  need_tools
  [ -d "$target/.git" ] || { echo "matrix.sh: run '$0 setup' first ($target missing)" >&2; exit 2; }
  target="$(variant_target "$primary")"
  [ -f "$model" ] || { echo "matrix.sh: model $model missing; run '$0 setup'" >&2; exit 2; }
  if [ -n "${SIM:-}" ]; then
    [ -n "$sim_model" ] && [ -f "$sim_model" ] || { echo "matrix.sh: SIM=1 needs the reduced model ${sim_model:-of this shape}; run '$0 setup'" >&2; exit 2; }
    export AUTORESEARCH_SIM_MODEL="$sim_model"
    # a tg128 cell's yardstick generates (the matrix-vector path), a prompt cell's processes a prompt
    if [ "$primary" = tg128 ]; then export AUTORESEARCH_SIM_GEN=16; else unset AUTORESEARCH_SIM_GEN; fi
  fi
  rm -rf "$dest"          # a staged folder holds one run's files, never a mix of two runs'
  mkdir -p "$dest"
  local cmd=(nice -n 10 "$AR" run "$target" --out "$out" "$@") tg=on
  [ "$primary" = pp512only ] && tg=off
  {
    echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(machine_line)"
    echo "${TOP:+TOP=$TOP }${SIM:+SIM=1 AUTORESEARCH_SIM_MODEL=$sim_model ${AUTORESEARCH_SIM_GEN:+AUTORESEARCH_SIM_GEN=$AUTORESEARCH_SIM_GEN }}AUTORESEARCH_MODEL=$model AUTORESEARCH_THREADS=$threads AUTORESEARCH_TG=$tg AUTORESEARCH_CFLAGS='${AUTORESEARCH_CFLAGS:-}' ${cmd[*]}"
    echo "# target HEAD: $(git -C "$target" log -1 --format='%h %s')"
  } > "$dest/command.txt"
  local started=$SECONDS rc=0
  AUTORESEARCH_MODEL="$model" AUTORESEARCH_THREADS="$threads" AUTORESEARCH_TG="$tg" "${cmd[@]}" || rc=$?
  {
    echo "# ended $(date -u +%Y-%m-%dT%H:%MZ); $(machine_line)"
    echo "# exit $rc after $((SECONDS - started)) s"
  } >> "$dest/command.txt"
  for f in pr.md research.md summary.json hypotheses.json experiments.jsonl; do
    [ -f "$out/$f" ] && cp "$out/$f" "$dest/$f"
  done
  echo "results staged in $dest (exit $rc); '$0 publish $name' copies them into $PUBLISHED/"
  return $rc
}

# publish CELL: a finished run's staged folder (exit 0, with pr.md and summary.json) replaces
# results/<cell>[-TAG]-<isa>/ whole, so a committed folder never mixes files of two runs.
publish() {
  local cell="$1${SIM:+-sim}" suffix
  suffix="$(isa)"
  local src="$STAGE/$cell-$suffix" dest="$PUBLISHED/$cell${TAG:+-$TAG}-$suffix"
  [ -d "$src" ] || { echo "matrix.sh: nothing staged for $cell on $suffix ($src); run '$0 run $cell' first" >&2; exit 2; }
  grep -q '^# exit 0 ' "$src/command.txt" 2>/dev/null && [ -f "$src/pr.md" ] && [ -f "$src/summary.json" ] || {
    echo "matrix.sh: $src is not a finished run (needs '# exit 0' in command.txt, pr.md and summary.json); not published" >&2; exit 2; }
  # one step at a time: under `set -e` a failure inside an && list would not stop the script, and
  # "published" would be printed for a copy that never happened (a RESULTS folder that did not exist)
  mkdir -p "$PUBLISHED"
  rm -rf "$dest.tmp"
  cp -r "$src" "$dest.tmp"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  echo "published $dest"
}

# candidate RECIPE: the recipe's edits (kernels/recipes/llama.cpp) on the targets' llama.cpp tree, as
# the `git diff` a maintainer would hand `--candidate`: a cell then measures that one change alone,
# without research or ranking. Written to $WORK/candidates/RECIPE.patch (never into this repository:
# its context lines are llama.cpp's).
candidate() {
  local recipe="$1" target="$WORK/target-pp512only" tmp
  [ -d "$target/.git" ] || { echo "matrix.sh: run '$0 targets' first ($target missing)" >&2; exit 2; }
  mkdir -p "$WORK/candidates"
  tmp="$(mktemp -d)"
  git clone -q "$target" "$tmp/tree"
  if ! "$PY" - "$ROOT" "$tmp/tree" "$recipe" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from jobs.research.recipes import RecipeError, load_recipe_set, planned_edits
tree, wanted = Path(sys.argv[2]), sys.argv[3]
found = [r for r in load_recipe_set("llama.cpp") if r.id == wanted]
if not found:
    sys.exit(f"matrix.sh: no recipe {wanted!r} in kernels/recipes/llama.cpp")
try:
    edits = planned_edits(found[0], tree)
except RecipeError as exc:
    sys.exit(f"matrix.sh: {exc}")
for rel, text in edits.items():
    (tree / rel).write_text(text)
PY
  then rm -rf "$tmp"; exit 2; fi
  git -C "$tmp/tree" diff > "$WORK/candidates/$recipe.patch"
  rm -rf "$tmp"
  echo "$WORK/candidates/$recipe.patch"
}

case "${1:-}" in
  setup) setup ;;
  candidate)
    [ $# -eq 2 ] || { echo "usage: $0 candidate RECIPE" >&2; exit 2; }
    candidate "$2" ;;
  targets) targets ;;
  cells)
    for c in $(cells); do
      IFS=- read -r m t p <<< "$c"
      tg=on; [ "$p" = pp512only ] && tg=off
      echo "$c: AUTORESEARCH_MODEL=${MODEL[$m]} AUTORESEARCH_THREADS=${t#t} AUTORESEARCH_TG=$tg $AR run $WORK/target-$p --out $WORK/runs/$c-<isa>"
    done ;;
  publish)
    [ $# -eq 2 ] || { echo "usage: $0 publish CELL" >&2; exit 2; }
    publish "$2" ;;
  run)
    [ $# -ge 2 ] || { echo "usage: $0 run CELL [autoresearch args]" >&2; exit 2; }
    cell="$2"; shift 2
    IFS=- read -r m t p <<< "$cell"
    [ -n "${MODEL[$m]:-}" ] && [[ "$t" =~ ^t[0-9]+$ ]] && [[ "$p" =~ ^(pp512|tg128|pp512only)$ ]] || {
      echo "matrix.sh: unknown cell '$cell' (see '$0 cells')" >&2; exit 2; }
    run_cell "$cell" "${MODEL[$m]}" "${t#t}" "$p" "${SIM_MODEL[$m]:-}" "$@" ;;
  all)
    shift
    for c in $(cells); do "$0" run "$c" "$@" || echo "cell $c exited non-zero; continuing" >&2; done ;;
  smoke)
    shift
    run_cell "smoke-gemma3-4L-t1" "${MODEL[gemma3-4L]}" 1 pp512 "" --repeats 3 "$@" ;;
  *) sed -n '2,30p' "$0"; exit 2 ;;
esac
