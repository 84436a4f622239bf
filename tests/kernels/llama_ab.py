"""Slow real-target check: build llama.cpp baseline vs patched (this project's recipes), check the
touched ops with test-backend-ops, and A/B llama-bench on a synthetic TinyLlama-shaped Q4_0 model.

    python tests/kernels/llama_ab.py --layers 4 --rounds 6            # quick: 4-layer model (~181 MiB)
    python tests/kernels/llama_ab.py --layers 22 --rounds 5           # confirm on the full-size shape
    python tests/kernels/llama_ab.py --only ops                       # build + test-backend-ops only
    python tests/kernels/llama_ab.py --only perf                      # op-level A/B (test-backend-ops perf)
    python tests/kernels/llama_ab.py --only logits                    # whole-model logits, fused vs unfused
    python tests/kernels/llama_ab.py --only profile --threads 1       # op profile per model shape
    python tests/kernels/llama_ab.py --only neon                      # AArch64 cross build, checks under qemu
    python tests/kernels/llama_ab.py --only ops --isa avx2            # the AVX2 (or x86-64 scalar) paths
    python tests/kernels/llama_ab.py --shape qwen3 --layers 28 --fa 1 # A/B on the Qwen3-0.6B shape
    python tests/kernels/llama_ab.py --only sim --shape qwen3 --layers 2 --sim-prompt 64 \
        --sim-arms "base=;tile-pack=fa-tile-pack;k-once=fa-tile-pack,fa-k-pack-once"
                                                                      # cachegrind cycles per recipe stack
    python tests/kernels/llama_ab.py --only profile-mm --shape qwen3 --layers 2 --threads 1 \
        --mm-workloads pp512,pp64,tg16                                # callgrind of the base tree's MUL_MAT
        [--mm-recipes q4-0-unsigned-nibble]                           # ... or of the base plus recipes

Steps (each reuses what a previous run left in --workdir):
1. source: the llama.cpp tree vendored by the llama-cpp-python sdist (llama_tree.py, cached);
   `baseline/src` is a copy, `patched/src` the same plus every recipe of
   kernels/recipes/llama.cpp that detects as applicable (files are rewritten only when their
   content changes, so rebuilds stay incremental).
2. build: CMake + Ninja, Release, GGML_NATIVE, targets llama-bench and test-backend-ops, through
   ccache with CCACHE_BASEDIR=--workdir and CCACHE_NOHASHDIR=1: both variants live at the same
   relative layout (<variant>/src, <variant>/build), so unchanged translation units hit the cache.
3. ops: `test-backend-ops test -b CPU -o <op>` for each touched op, on both builds. The CPU
   backend is compared with itself in reference mode (use_ref), where the recipes keep the old
   path, so the patched build really compares new against old.
4. model: a GGUF written with the `gguf` package: llama architecture, n_vocab 32000, n_embd
   2048, n_head 32, n_head_kv 4, n_ff 5632, Q4_0 weights with random nibbles and a fixed scale
   (speed does not depend on the values), --layers blocks (22 = TinyLlama-1.1B).
5. bench: `llama-bench -m model -p 512 -n 128 -r 1 -o json -fa F -t T` as whole processes,
   baseline and patched interleaved A B B A ... for each -fa setting; one process = one sample.
   pp512 and tg128 are compared with jobs.stats.stats.compare (log-scale Welch, paired under drift).
Results go to stdout (a table and METRIC lines) and to <workdir>/ab-result.json.

It lives under tests/ rather than kernels/ because it uses the project's Python (jobs.research.recipes,
jobs.stats.stats), and kernels/ imports none (ARCHITECTURE.md). pytest does not collect it (no test_ prefix);
tests/kernels/test_ab_script.py tests its pure parts.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernels" / "llama"))   # llama_tree.py: stdlib only
sys.path.insert(0, str(ROOT))

import llama_tree  # noqa: E402

VARIANTS = ("baseline", "patched")
# -march=native on a CPU that reports AMX compiles ggml's AMX buffer type, whose Q4_0 matmul
# segfaults on this machine's VM (ggml_backend_amx_mul_mat, llama-cpp-python 0.3.36); without it
# Q4_0 weights take the AVX-512 repack path, as on the study's machines. Harmless without AMX.
AMX_OFF = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" if platform.machine() in ("x86_64", "AMD64") else ""


def _compile_flags(flags: str) -> list[str]:
    """CMake arguments giving C and C++ the same extra flags (none when `flags` is empty)."""
    return [f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"] if flags else []


NO_AMX = _compile_flags(AMX_OFF)
TARGETS = ("llama-bench", "test-backend-ops")
# test-backend-ops params filters: MUL_MAT has thousands of cases; the recipe touching it (the
# from_float split of the repacked Q4_0 path) only matters for q4_0 x f32. Note that
# test-backend-ops allocates weights in plain CPU buffers, so the repacked path itself is not
# exercised there; the split is checked by kernels/tests (identical bytes) instead.
# FLASH_ATTN_EXT: nb=75 are the cases with >= 64 query rows, the ones that take the tiled path.
OP_PARAMS = {"MUL_MAT": "type_a=q4_0,type_b=f32", "FLASH_ATTN_EXT": "nb=75,"}
_TOP_SKIP = {".git", "models", "docs", "media"}
_BACKEND_SKIP = {"ggml-cuda", "ggml-vulkan", "ggml-sycl", "ggml-metal", "ggml-opencl", "ggml-cann",
                 "ggml-musa", "ggml-hip", "ggml-webgpu", "ggml-hexagon", "ggml-openvino", "ggml-zdnn",
                 "ggml-zendnn", "ggml-virtgpu", "ggml-et"}


def SKIP_DIRS(directory: str, names: list[str]) -> set[str]:
    """copytree filter: large top-level folders and the GPU backends (not built here)."""
    d = Path(directory)
    skip = set()
    if (d / "ggml").is_dir() and (d / "CMakeLists.txt").is_file():      # tree root
        skip |= _TOP_SKIP & set(names)
    if d.name == "src" and d.parent.name == "ggml":
        skip |= _BACKEND_SKIP & set(names)
    return skip


def log(msg: str) -> None:
    print(f"[ab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- 1. source

def _sync_file(src: Path, dst: Path, text: str | None = None) -> bool:
    data = text.encode() if text is not None else src.read_bytes()
    if dst.is_file() and dst.read_bytes() == data:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    return True


# Beside the recipes: the op-profile hook (kernels/llama/op-profile.yml, for the profile-*
# variants) and extra test-backend-ops cases for the fused paths (tests/kernels/backend_ops_cases.yml,
# applied to every patched variant; verification only, never part of a recipe).
OP_PROFILE = ROOT / "kernels" / "llama" / "op-profile.yml"
BACKEND_OPS_CASES = Path(__file__).with_name("backend_ops_cases.yml")
# test-backend-ops names of the fused graphs each graph-level fusion recipe changes (its single
# ops, e.g. MUL or ADD, have thousands of unrelated cases)
FUSION_CHECKS = {"fuse-rmsnorm-mul-add": ["RMS_NORM_MUL_ADD"],
                 "fuse-rmsnorm-mul-rope": ["RMS_NORM_MUL_ROPE"],
                 "fuse-mul-mat-glu": ["MUL_MAT_VEC_FUSION"]}


def _extras() -> list:
    from jobs.research.recipes import load_recipe
    return [load_recipe(OP_PROFILE), load_recipe(BACKEND_OPS_CASES)]


def stage_variant(tree: Path, workdir: Path, variant: str, recipes: list, extras: list) -> tuple[list, dict, set]:
    """Apply `recipes` then `extras` to a scratch copy of the pristine tree's ggml/ and tests/,
    and sync every file any of them could touch into <variant>/src (rewritten only on change)."""
    from jobs.research.recipes import detect, load_recipe_set, planned_edits

    src = workdir / variant / "src"
    if not (src / "CMakeLists.txt").is_file():
        log(f"copying {tree} -> {src}")
        shutil.copytree(tree, src, ignore=SKIP_DIRS, dirs_exist_ok=True)
    stage = workdir / f".stage-{variant}"
    if stage.exists():
        shutil.rmtree(stage)
    shutil.copytree(tree / "ggml", stage / "ggml", ignore=SKIP_DIRS)
    shutil.copytree(tree / "tests", stage / "tests")
    applied, statuses, touched = [], {}, set()

    def apply(r) -> bool:
        """Apply `r` to the stage if it detects its unfused form there; record what detect said."""
        d = detect(r, stage)
        statuses[r.id] = {"status": d.status, "evidence": d.evidence, "reason": d.reason}
        if d.status != "applicable":
            return False
        for rel, text in planned_edits(r, stage).items():
            (stage / rel).write_text(text, encoding="utf-8")
            touched.add(rel)
        applied.append(r.id)
        return True

    # recipes in passes until none applies: one that stacks on another (fa-k-pack-once on
    # fa-tile-pack) applies in the pass after the one it needs; the extras come last, once
    pending = list(recipes)
    while now := [r for r in pending if apply(r)]:
        pending = [r for r in pending if r not in now]
    for r in extras:
        apply(r)
    candidates = {e.file for r in [*load_recipe_set("llama.cpp"), *_extras()] for e in r.edits
                  if (tree / e.file).is_file()}
    changed = [rel for rel in sorted(candidates) if _sync_file(stage / rel, src / rel)]
    shutil.rmtree(stage)
    log(f"{variant}: applied {applied or 'nothing'}; rewritten: {changed or 'nothing'}")
    return applied, statuses, touched


def prepare(tree: Path, workdir: Path, recipe_ids: list[str] | None = None, profile: bool = False) -> dict:
    """Create/refresh baseline/src and patched/src (plus profile-baseline and profile-patched
    with the op-profile hook when `profile`); return what was applied."""
    from jobs.research.recipes import load_recipe_set

    workdir.mkdir(parents=True, exist_ok=True)
    recipes = [r for r in load_recipe_set("llama.cpp") if not recipe_ids or r.id in recipe_ids]
    op_profile, cases = _extras()
    stage_variant(tree, workdir, "baseline", [], [])
    applied, statuses, touched = stage_variant(tree, workdir, "patched", recipes, [cases])
    if profile:
        stage_variant(tree, workdir, "profile-baseline", [], [op_profile])
        stage_variant(tree, workdir, "profile-patched", recipes, [op_profile])
    applied = [a for a in applied if a != cases.id]
    by_id = {r.id: r for r in recipes}
    ops = sorted({name for rid in applied
                  for name in (FUSION_CHECKS.get(rid) or (by_id[rid].ops if len(by_id[rid].ops) == 1 else []))})
    return {"workdir": str(workdir), "applied": applied,
            "detection": {k: v for k, v in statuses.items() if k != cases.id}, "ops": ops,
            "touched": sorted(touched)}


# ---------------------------------------------------------------------------- 2. build

# x86 builds besides the native one (-march=native: AVX-512 here), so the AVX2 and the scalar
# paths of the recipes run too: GGML_NATIVE=OFF with ggml's own ISA switches.
_X86_OFF = ["-DGGML_SSE42=OFF", "-DGGML_AVX=OFF", "-DGGML_AVX2=OFF", "-DGGML_BMI2=OFF", "-DGGML_FMA=OFF",
            "-DGGML_F16C=OFF", "-DGGML_AVX512=OFF", "-DGGML_AVX_VNNI=OFF"]
ISA_FLAGS = {
    "native": ["-DGGML_NATIVE=ON"],
    "avx2": ["-DGGML_NATIVE=OFF", *_X86_OFF, "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON",
             "-DGGML_BMI2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"],
    "x86-64": ["-DGGML_NATIVE=OFF", *_X86_OFF],
}


def _ccache(workdir: Path) -> tuple[dict[str, str], list[str]]:
    """The build's environment and cmake launcher flags: ccache keyed on paths relative to
    `workdir`, so every variant's tree shares the cache (none when ccache is not installed)."""
    env = dict(os.environ)
    if not shutil.which("ccache"):
        return env, []
    env.update(CCACHE_BASEDIR=str(workdir), CCACHE_NOHASHDIR="1")
    env.setdefault("CCACHE_DIR", str(llama_tree.cache_dir() / "ccache"))
    return env, ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]


def debug_flags(debug: bool) -> list[str]:
    """CMAKE_C/CXX_FLAGS of a build: the AMX switches (x86) plus `-g` when `debug`. Release keeps its
    -O3, so a debug build runs the same code with line tables (callgrind attributes inlined
    intrinsics to their source lines); `-g` alone, not RelWithDebInfo, whose -O2 would differ."""
    return _compile_flags(f"{AMX_OFF} -g".strip()) if debug else list(NO_AMX)


def build(workdir: Path, variant: str, jobs: int = 2, isa: str = "native", targets: tuple[str, ...] = TARGETS,
          debug: bool = False) -> Path:
    src = workdir / variant / "src"
    bld = workdir / variant / (("build" if isa == "native" else f"build-{isa}") + ("-g" if debug else ""))
    tag = isa + ("-g" if debug else "")
    env, launcher = _ccache(workdir)
    if not (bld / "build.ninja").is_file() and not (bld / "Makefile").is_file():
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        cmd = ["cmake", "-S", str(src), "-B", str(bld), *gen, "-DCMAKE_BUILD_TYPE=Release",
               *ISA_FLAGS[isa], "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=ON",
               "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
               "-DLLAMA_BUILD_APP=OFF", "-DBUILD_SHARED_LIBS=OFF", *launcher, *debug_flags(debug)]
        log(f"configure {variant} ({tag})")
        _run(cmd, env, bld.parent / f"configure-{tag}.log")
    t0 = time.time()
    _run(["cmake", "--build", str(bld), "-j", str(jobs), "--target", *targets], env, bld.parent / f"build-{tag}.log")
    log(f"built {variant} ({tag}) in {time.time() - t0:.0f}s")
    return bld / "bin"


def _run(cmd: list[str], env: dict, logfile: Path) -> None:
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "w") as fh:
        proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = logfile.read_text(errors="replace").splitlines()[-40:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({logfile}):\n" + "\n".join(tail))


# ---------------------------------------------------------------------------- 3. ops

def run_backend_ops(bin_dir: Path, op: str, timeout: int = 1800, prefix: list[str] | None = None) -> dict:
    cmd = [*(prefix or []), str(bin_dir / "test-backend-ops"), "test", "-b", "CPU", "-o", op]
    if op in OP_PARAMS:
        cmd += ["-p", OP_PARAMS[op]]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    import re
    m = re.search(r"(\d+)/(\d+) tests passed", out)
    passed, total = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    fails = [line.strip() for line in out.splitlines() if "FAIL" in line][:20]
    ok = proc.returncode == 0 and total > 0 and passed == total
    return {"op": op, "ok": ok, "passed": passed, "total": total, "seconds": round(time.time() - t0, 1),
            "returncode": proc.returncode, "fails": fails}


def check_ops(prep: dict, jobs: int = 2, variants: tuple[str, ...] = ("patched",), isa: str = "native") -> dict:
    """test-backend-ops on the touched ops (patched build by default; the baseline as a control)."""
    workdir = Path(prep["workdir"])
    results = {}
    for variant in variants:
        bins = build(workdir, variant, jobs, isa)
        results[variant] = [run_backend_ops(bins, op) for op in prep["ops"]]
        for r in results[variant]:
            log(f"test-backend-ops {variant} {r['op']}: {r['passed']}/{r['total']} "
                f"{'OK' if r['ok'] else 'FAIL'} ({r['seconds']}s)")
    ok = all(r["ok"] for r in results["patched"])
    return {"ok": ok, "ops": results, "applied": prep["applied"]}


# test-backend-ops perf cases per op. Only SOFT_MAX has perf cases that take the patched path
# at a tractable cost (RMS_NORM has none; the only tiled FLASH_ATTN_EXT perf case is 150 GFLOP).
PERF_OPS = {"SOFT_MAX": None}


def run_backend_perf(bin_dir: Path, op: str, params: str | None) -> dict[str, float]:
    """us/run per case from one `test-backend-ops perf -b CPU -o OP` process."""
    import re
    cmd = [str(bin_dir / "test-backend-ops"), "perf", "-b", "CPU", "-o", op]
    if params:
        cmd += ["-p", params]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    out: dict[str, float] = {}
    for m in re.finditer(r"^\s+(\w+\(.*?\)):\s+(\d+) runs -\s+([\d.]+) us/run", proc.stdout, re.M):
        out[m.group(1)] = float(m.group(3))
    if proc.returncode != 0 or not out:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}, {len(out)} cases: {proc.stdout[-1500:]}")
    return out


def ab_perf(prep: dict, rounds: int, jobs: int = 2) -> dict:
    """Op-level A/B inside llama.cpp: test-backend-ops perf, processes interleaved A B B A."""
    from jobs.stats.stats import abba_order, compare

    workdir = Path(prep["workdir"])
    bins = {v: build(workdir, v, jobs) for v in VARIANTS}
    order = [c for c in abba_order(rounds) if c in ("A", "B")]
    results = []
    for op in [o for o in prep["ops"] if o in PERF_OPS]:
        samples = {v: {"order": [], "cases": {}} for v in VARIANTS}
        for idx, arm in enumerate(order):
            variant = "baseline" if arm == "A" else "patched"
            res = run_backend_perf(bins[variant], op, PERF_OPS[op])
            samples[variant]["order"].append(idx)
            for case, us in res.items():
                samples[variant]["cases"].setdefault(case, []).append(us)
        for case in samples["baseline"]["cases"]:
            b, h = samples["baseline"]["cases"][case], samples["patched"]["cases"].get(case, [])
            r = compare(b, h, direction="lower", base_order=samples["baseline"]["order"],
                        head_order=samples["patched"]["order"], name=case)
            results.append({"op": op, "case": case, **_result_dict(r)})
            log(f"perf {case}: {r.base_mean:.1f} -> {r.head_mean:.1f} us/run ({r.delta_pct:+.1f}%, {r.verdict})")
    return {"results": results}


# ---------------------------------------------------------------------------- 4. model

# Model shapes the synthetic writer knows (GGUF architecture + hyper-parameters). Vocabularies
# are cut to 32000 (the real ones: Qwen3 151936, Gemma3 262144): the embedding lookup and the
# output projection stay the same kind of work at a size this 2-core machine benchmarks quickly.
SHAPES: dict[str, dict] = {
    # TinyLlama-1.1B: no QK-norm, no post-norms (RMS_NORM+MUL, MUL_MAT+MUL_MAT+GLU only)
    "tinyllama": dict(arch="llama", n_layer=22, n_embd=2048, n_head=32, n_head_kv=4, n_ff=5632),
    # Qwen3-0.6B: QK-norm (RMS_NORM+MUL+ROPE on Q, +VIEW+SET_ROWS on K), head_dim 128 != n_embd/n_head
    "qwen3": dict(arch="qwen3", n_layer=28, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072,
                  rope_base=1e6, eps=1e-6),
    # Gemma3-1B without sliding window: QK-norm and post-norms with a residual ADD, GELU FFN
    "gemma3": dict(arch="gemma3", n_layer=26, n_embd=1152, n_head=4, n_head_kv=1, head_dim=256, n_ff=6912,
                   rope_base=1e6, eps=1e-6),
}


def model_path(shape: str, n_layer: int | None = None) -> Path:
    """Where the synthetic model of a shape lives in the cache (one file per shape and depth)."""
    spec = SHAPES[shape]
    layers = n_layer or spec["n_layer"]
    name = "synthetic-tinyllama" if shape == "tinyllama" else f"synthetic-{shape}"
    return llama_tree.cache_dir() / "models" / f"{name}-{layers}L-q4_0.gguf"


def make_model(path: Path, n_layer: int = 22, n_vocab: int = 32000, n_embd: int = 2048, n_head: int = 32,
               n_head_kv: int = 4, n_ff: int = 5632, seed: int = 0, arch: str = "llama",
               head_dim: int | None = None, rope_base: float = 10000.0, eps: float = 1e-5) -> Path:
    """Synthetic Q4_0 GGUF of a llama / qwen3 / gemma3 shape (random nibbles, fixed block scale).

    arch "llama": TinyLlama's layer (attn_norm, q/k/v/o, ffn_norm, gate/up/down).
    arch "qwen3": the same plus attn_q_norm / attn_k_norm ([head_dim] weights: QK-norm).
    arch "gemma3": QK-norm plus post_attention_norm and post_ffw_norm (RMS_NORM+MUL, then the
    residual ADD), no sliding window, embeddings tied to the output (no output.weight).
    head_dim defaults to n_embd / n_head; Qwen3 and Gemma3 use a larger one (key_length)."""
    import numpy as np
    import gguf

    if arch not in ("llama", "qwen3", "gemma3"):
        raise ValueError(f"make_model: unknown arch {arch!r} (llama, qwen3, gemma3)")
    if path.is_file():
        return path
    head_dim = head_dim or n_embd // n_head
    for name, rows in (("n_embd", n_embd), ("n_ff", n_ff), ("n_head*head_dim", n_head * head_dim)):
        if rows % 32:
            raise ValueError(f"make_model: {name}={rows} must be a multiple of 32 (Q4_0 blocks)")
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    q4 = gguf.GGMLQuantizationType.Q4_0
    d16 = np.array([0.02], dtype=np.float16).view(np.uint8)

    def q4_0(rows: int, cols: int):
        nb = cols // 32
        blocks = rng.integers(0, 256, size=(rows, nb, 18), dtype=np.uint8)
        blocks[:, :, 0] = d16[0]
        blocks[:, :, 1] = d16[1]
        return blocks.reshape(rows, nb * 18)

    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), arch)
    w.add_name(f"synthetic-{'tinyllama' if arch == 'llama' else arch}-{n_layer}L-q4_0")
    w.add_context_length(2048)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    if head_dim != n_embd // n_head or arch != "llama":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(rope_base)
    w.add_layer_norm_rms_eps(eps)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"tok{i}" for i in range(n_vocab - len(tokens))]
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * n_vocab)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (n_vocab - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    ones = np.ones(n_embd, dtype=np.float32)
    head_ones = np.ones(head_dim, dtype=np.float32)
    q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim
    w.add_tensor("token_embd.weight", q4_0(n_vocab, n_embd), raw_dtype=q4)
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", q4_0(q_dim, n_embd), raw_dtype=q4)
        w.add_tensor(f"blk.{i}.attn_k.weight", q4_0(kv_dim, n_embd), raw_dtype=q4)
        w.add_tensor(f"blk.{i}.attn_v.weight", q4_0(kv_dim, n_embd), raw_dtype=q4)
        w.add_tensor(f"blk.{i}.attn_output.weight", q4_0(n_embd, q_dim), raw_dtype=q4)
        if arch in ("qwen3", "gemma3"):
            w.add_tensor(f"blk.{i}.attn_q_norm.weight", head_ones)
            w.add_tensor(f"blk.{i}.attn_k_norm.weight", head_ones)
        if arch == "gemma3":
            w.add_tensor(f"blk.{i}.post_attention_norm.weight", ones)
            w.add_tensor(f"blk.{i}.post_ffw_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", q4_0(n_ff, n_embd), raw_dtype=q4)
        w.add_tensor(f"blk.{i}.ffn_up.weight", q4_0(n_ff, n_embd), raw_dtype=q4)
        w.add_tensor(f"blk.{i}.ffn_down.weight", q4_0(n_embd, n_ff), raw_dtype=q4)
    w.add_tensor("output_norm.weight", ones)
    if arch != "gemma3":
        w.add_tensor("output.weight", q4_0(n_vocab, n_embd), raw_dtype=q4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.rename(path)
    log(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return path


def make_shape(shape: str, n_layer: int | None = None) -> Path:
    """The cached synthetic model of a named shape (written once)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r} (known: {', '.join(SHAPES)})")
    spec = dict(SHAPES[shape])
    if n_layer:
        spec["n_layer"] = n_layer
    return make_model(model_path(shape, spec["n_layer"]), **spec)


# ---------------------------------------------------------------------------- 5. bench

def parse_llama_bench(stdout: str, fa: int) -> dict[str, float]:
    """pp512 and tg128 tokens/s from one `llama-bench -o json` process; raises on anything odd."""
    rows = json.loads(stdout)
    out: dict[str, float] = {}
    for row in rows:
        if int(row.get("flash_attn", fa)) != fa:
            raise ValueError(f"llama-bench ran flash_attn={row.get('flash_attn')}, asked for {fa}")
        n_prompt, n_gen, ts = int(row["n_prompt"]), int(row["n_gen"]), float(row["avg_ts"])
        if n_prompt > 0 and n_gen == 0:
            out[f"pp{n_prompt}"] = ts
        elif n_gen > 0 and n_prompt == 0:
            out[f"tg{n_gen}"] = ts
    if set(out) != {"pp512", "tg128"} or not all(v > 0 for v in out.values()):
        raise ValueError(f"unexpected llama-bench results: {out} from {stdout[:400]}")
    return out


def run_bench(bin_dir: Path, model: Path, fa: int, threads: int) -> dict[str, float]:
    cmd = [str(bin_dir / "llama-bench"), "-m", str(model), "-p", "512", "-n", "128", "-r", "1",
           "-o", "json", "-fa", str(fa), "-t", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return parse_llama_bench(proc.stdout, fa)


def machine_probe(seconds: float = 0.25) -> float:
    """Machine-speed probe taken beside each invocation: single-thread sha256 MB/s. A busy
    neighbour slows it and the benchmark alike; jobs.stats.stats uses it as a covariate."""
    import hashlib
    block = b"\x5a" * (1 << 20)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        hashlib.sha256(block).digest()
        n += 1
    return n / (time.perf_counter() - t0)


def ab_bench(prep: dict, model: Path, rounds: int, fas: list[int], threads: int, jobs: int = 2) -> dict:
    from jobs.stats.stats import abba_order, compare

    workdir = Path(prep["workdir"])
    bins = {v: build(workdir, v, jobs) for v in VARIANTS}
    order = [c for c in abba_order(rounds) if c in ("A", "B")]
    samples: dict = {fa: {v: {"pp512": [], "tg128": [], "order": [], "probe": []} for v in VARIANTS} for fa in fas}
    idx = 0
    for fa in fas:
        run_bench(bins["baseline"], model, fa, threads)   # warm-up: page cache, CPU clocks
        for arm in order:
            variant = "baseline" if arm == "A" else "patched"
            probe = machine_probe()
            res = run_bench(bins[variant], model, fa, threads)
            s = samples[fa][variant]
            s["probe"].append(probe)
            s["pp512"].append(res["pp512"])
            s["tg128"].append(res["tg128"])
            s["order"].append(idx)
            idx += 1
            log(f"fa={fa} {variant:8s} pp512 {res['pp512']:8.2f}  tg128 {res['tg128']:7.2f}  probe {probe:6.0f} MB/s")
    results = []
    for fa in fas:
        for metric in ("pp512", "tg128"):
            b, h = samples[fa]["baseline"], samples[fa]["patched"]
            r = compare(b[metric], h[metric], direction="higher", base_order=b["order"],
                        head_order=h["order"], base_probe=b["probe"], head_probe=h["probe"],
                        name=f"{metric}_fa{fa}")
            results.append({"fa": fa, "metric": metric, **_result_dict(r)})
    return {"samples": samples, "results": results}


# ---------------------------------------------------------------------------- 6. whole-model logits

LOGITS_SRC = Path(__file__).with_name("logits_dump.cpp")
# fused vs unfused logits: same argmax everywhere and at most this relative difference (the fused
# kernels round some products once where the separate nodes round twice)
LOGITS_MAX_REL = 1e-3


def build_logits_dump(workdir: Path, variant: str, isa: str = "native") -> Path:
    """tests/kernels/logits_dump.cpp linked against <variant>'s static llama/ggml libraries."""
    src = workdir / variant / "src"
    bld = workdir / variant / ("build" if isa == "native" else f"build-{isa}")
    libs = [bld / "src" / "libllama.a", bld / "ggml" / "src" / "libggml.a",
            bld / "ggml" / "src" / "libggml-cpu.a", bld / "ggml" / "src" / "libggml-base.a"]
    out = bld / "bin" / "logits-dump"
    cmd = [shutil.which("g++") or "c++", "-O2", "-std=c++17", str(LOGITS_SRC), f"-I{src / 'include'}",
           f"-I{src / 'ggml' / 'include'}", "-o", str(out), *map(str, libs), "-fopenmp", "-lpthread", "-ldl"]
    _run(cmd, dict(os.environ), bld.parent / "logits-dump.log")
    return out


def read_logits(path: Path):
    import numpy as np
    n_vocab, n_rows = (int(v) for v in np.fromfile(path, dtype=np.int32, count=2))
    data = np.fromfile(path, dtype=np.float32, offset=8)
    if n_vocab <= 0 or data.size != n_vocab * n_rows:
        raise ValueError(f"{path}: header says {n_rows} x {n_vocab}, file holds {data.size} floats")
    return data.reshape(n_rows, n_vocab)


def compare_logits(head, base) -> dict:
    """How far two logit dumps of the same inputs are apart (rows = token positions)."""
    import numpy as np
    if head.shape != base.shape:
        raise ValueError(f"logit shapes differ: {head.shape} vs {base.shape}")
    if not (np.isfinite(head).all() and np.isfinite(base).all()):
        raise ValueError("non-finite logits")
    diff = np.abs(head.astype(np.float64) - base.astype(np.float64))
    scale = float(np.abs(base).max()) or 1.0
    return {"rows": int(head.shape[0]), "max_abs": float(diff.max()), "max_rel": float(diff.max()) / scale,
            "identical_rows": int((diff.max(axis=1) == 0).sum()),
            "argmax_agree": float((head.argmax(axis=1) == base.argmax(axis=1)).mean())}


def check_logits(prep: dict, shapes: list[str], layers: int, threads: int, jobs: int = 2,
                 n_prompt: int = 64, n_gen: int = 8, isa: str = "native") -> dict:
    """Per model shape: patched with its fusions vs the same binary with GGML_CPU_DISABLE_FUSION=1
    (the unfused nodes), and vs the baseline build; one batch of n_prompt tokens (prompt graphs)
    then n_gen single tokens (generation graphs)."""
    workdir = Path(prep["workdir"])
    dumps = {}
    for variant in VARIANTS:
        build(workdir, variant, jobs, isa)
        dumps[variant] = build_logits_dump(workdir, variant, isa)
    out: dict = {}
    for shape in shapes:
        model = make_shape(shape, layers)
        files = {}
        for label, variant, env_extra in (("fused", "patched", {}), ("unfused", "patched", {"GGML_CPU_DISABLE_FUSION": "1"}),
                                          ("baseline", "baseline", {})):
            files[label] = workdir / f"logits-{shape}-{isa}-{label}.bin"
            cmd = [str(dumps[variant]), str(model), str(files[label]), str(n_prompt), str(n_gen), str(threads)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env={**os.environ, **env_extra})
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-1500:]}")
        logits = {k: read_logits(v) for k, v in files.items()}
        out[shape] = {"model": str(model), "fused_vs_unfused": compare_logits(logits["fused"], logits["unfused"]),
                      "patched_vs_baseline": compare_logits(logits["fused"], logits["baseline"])}
        for k, v in out[shape].items():
            if k != "model":
                log(f"logits {shape} {k}: max |diff| {v['max_abs']:.3g} ({v['max_rel']:.2g} of max |logit|), "
                    f"{v['identical_rows']}/{v['rows']} rows identical, argmax agrees {100 * v['argmax_agree']:.1f}%")
    return out


# ---------------------------------------------------------------------------- 7. op profile

def profile_bench(workdir: Path, variant: str, model: Path, threads: int, jobs: int = 2, fa: str = "auto") -> str:
    """The op-profile file of one llama-bench -p 512 -n 128 -r 1 process of a profile-* variant."""
    bins = build(workdir, variant, jobs)
    out = workdir / f"{variant}-{model.stem}-t{threads}.prof"
    out.unlink(missing_ok=True)
    cmd = [str(bins / "llama-bench"), "-m", str(model), "-p", "512", "-n", "128", "-r", "1", "-o", "json",
           "-t", str(threads), "-fa", fa]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "GGML_CPU_OP_PROFILE": str(out)})
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return out.read_text()


def profile_report(prep: dict, shapes: list[str], layers: int | None, threads: int, jobs: int = 2) -> dict:
    """Per model shape: where pp512/tg128 time goes on the baseline (with every recipe's Amdahl
    bound) and which fusions run how often per graph on the patched tree. Markdown per shape in
    <workdir>/profile-<shape>-t<threads>.md."""
    from jobs.research.recipes import load_recipe_set
    from jobs.research import profile as P
    from jobs.research.offline import sequence_label

    workdir = Path(prep["workdir"])
    recipes = [r for r in load_recipe_set("llama.cpp") if r.id in prep["applied"]]
    sequences = {}
    for r in recipes:
        seqs = [tuple(r.ops)] + [tuple(c) for c in r.covers]
        sequences[sequence_label(seqs) + f" (`{r.id}`)"] = seqs
    out = {}
    for shape in shapes:
        model = make_shape(shape, layers)
        base = P.from_text(profile_bench(workdir, "profile-baseline", model, threads, jobs), ["pp512", "tg128"])
        patched = P.from_text(profile_bench(workdir, "profile-patched", model, threads, jobs), ["pp512", "tg128"])
        base.command = f"llama-bench -m {model.name} -p 512 -n 128 -r 1 -t {threads} (baseline + op-profile hook)"
        md = [f"# Op profile: {model.name}, -t {threads}", ""] + P.render(base, sequences)
        md += ["## Fusions that ran on the patched tree (kernels computing several nodes, per graph)", ""]
        md += [f"- {w.name}: " + (", ".join(f"{k} ×{v:g}" for k, v in w.fused_groups().items()) or "none")
               for w in patched.workloads]
        md += [f"- graph evaluation: " + ", ".join(
            f"{w.name} {w.total_ns / 1e6:.1f} ms baseline vs {pw.total_ns / 1e6:.1f} ms patched (one process each)"
            for w, pw in zip(base.workloads, patched.workloads)), ""]
        path = workdir / f"profile-{shape}-t{threads}.md"
        path.write_text("\n".join(md))
        log(f"profile of {shape}: {path}")
        out[shape] = {"markdown": str(path), "baseline": base.to_dict(), "patched": patched.to_dict()}
    return out


# ---------------------------------------------------------------------------- 8. NEON under qemu

AARCH64_ARCH = "armv8.2-a+dotprod+fp16"     # NEON + dot product, as the study's Graviton3 runs
# FLASH_ATTN_EXT's 1307 cases take ~140 s natively and far longer emulated; fuse-fa-kq-tile's NEON
# branch is checked by kernels/tests under qemu (make -C kernels test-aarch64) instead, fa-tile-pack's
# by tests/kernels/test_fa_tile_pack.py (its helper against the element loops, under qemu)
NEON_SKIP_OPS = {"FLASH_ATTN_EXT"}


def build_aarch64(workdir: Path, variant: str = "patched", jobs: int = 2) -> Path:
    """Cross-build <variant> for AArch64 (static, no OpenMP) with aarch64-linux-gnu-gcc; the
    binaries run under qemu-aarch64-static, so the recipes' NEON branches really execute."""
    for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "qemu-aarch64-static"):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} not found (Debian: gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static)")
    src, bld = workdir / variant / "src", workdir / variant / "build-aarch64"
    env, launcher = _ccache(workdir)
    if not (bld / "build.ninja").is_file() and not (bld / "Makefile").is_file():
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        cmd = ["cmake", "-S", str(src), "-B", str(bld), *gen, "-DCMAKE_BUILD_TYPE=Release",
               "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
               "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc", "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
               "-DGGML_NATIVE=OFF", f"-DGGML_CPU_ARM_ARCH={AARCH64_ARCH}", "-DGGML_OPENMP=OFF",
               "-DCMAKE_EXE_LINKER_FLAGS=-static", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=ON", "-DLLAMA_BUILD_TOOLS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF", *launcher]
        log(f"configure {variant} for aarch64")
        _run(cmd, env, bld.parent / "configure-aarch64.log")
    t0 = time.time()
    _run(["cmake", "--build", str(bld), "-j", str(jobs), "--target", "test-backend-ops", "llama"], env,
         bld.parent / "build-aarch64.log")
    log(f"built {variant} for aarch64 in {time.time() - t0:.0f}s")
    libs = [bld / "src" / "libllama.a", bld / "ggml" / "src" / "libggml.a",
            bld / "ggml" / "src" / "libggml-cpu.a", bld / "ggml" / "src" / "libggml-base.a"]
    _run(["aarch64-linux-gnu-g++", "-O2", "-std=c++17", "-static", str(LOGITS_SRC), f"-I{src / 'include'}",
          f"-I{src / 'ggml' / 'include'}", "-o", str(bld / "bin" / "logits-dump"), *map(str, libs), "-lpthread"],
         env, bld.parent / "logits-dump-aarch64.log")
    return bld / "bin"


def check_neon(prep: dict, shapes: list[str], jobs: int = 2, layers: int = 2) -> dict:
    """test-backend-ops on the touched ops and the fused-vs-unfused logits, all under qemu."""
    workdir = Path(prep["workdir"])
    bins = build_aarch64(workdir, "patched", jobs)
    qemu = shutil.which("qemu-aarch64-static")
    ops = []
    for op in [o for o in prep["ops"] if o not in NEON_SKIP_OPS]:
        r = run_backend_ops(bins, op, timeout=7200, prefix=[qemu])
        log(f"aarch64 (qemu) test-backend-ops {op}: {r['passed']}/{r['total']} {'OK' if r['ok'] else 'FAIL'} ({r['seconds']}s)")
        ops.append(r)
    logits = {}
    for shape in shapes:
        model = make_shape(shape, layers)
        files = {}
        for label, extra in (("fused", {}), ("unfused", {"GGML_CPU_DISABLE_FUSION": "1"})):
            files[label] = workdir / f"logits-aarch64-{shape}-{label}.bin"
            cmd = [qemu, str(bins / "logits-dump"), str(model), str(files[label]), "16", "4", "2"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=7200, env={**os.environ, **extra})
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-1500:]}")
        logits[shape] = compare_logits(read_logits(files["fused"]), read_logits(files["unfused"]))
        v = logits[shape]
        log(f"aarch64 (qemu) logits {shape} fused vs unfused: max |diff| {v['max_abs']:.3g}, "
            f"{v['identical_rows']}/{v['rows']} rows identical, argmax {100 * v['argmax_agree']:.1f}%")
    return {"ok": all(r["ok"] for r in ops), "ops": ops, "logits": logits}


# ---------------------------------------------------------------------------- 9. simulated cycles

def parse_arms(spec: str) -> dict[str, list[str]]:
    """"base=;k=fa-tile-pack,fa-k-pack-once" -> {"base": [], "k": ["fa-tile-pack", "fa-k-pack-once"]}."""
    arms: dict[str, list[str]] = {}
    for part in [p.strip() for p in spec.split(";") if p.strip()]:
        name, sep, ids = part.partition("=")
        if not sep or not name.strip() or name.strip() in arms:
            raise ValueError(f"bad arm {part!r} (want NAME=recipe,recipe; NAME= for none)")
        arms[name.strip()] = [r.strip() for r in ids.split(",") if r.strip()]
    if not arms:
        raise ValueError("no arms")
    return arms


def simulate_arms(tree: Path, workdir: Path, arms: dict[str, list[str]], model: Path, prompt: int,
                  threads: int = 1, jobs: int = 2, isa: str = "avx2", fa: int = 1) -> dict:
    """The project's deterministic yardstick (jobs/measure/simulate.py: cachegrind with a fixed cache
    geometry, simulated cycles = Ir + 10 L1 misses + 100 LL misses) on one llama-bench process per
    arm, each arm a stack of recipes built for `isa` (Valgrind 3.19 has no AVX-512: avx2)."""
    from jobs.research.recipes import load_recipe_set
    from jobs.measure import simulate

    by_id = {r.id: r for r in load_recipe_set("llama.cpp")}
    out: dict = {"model": str(model), "prompt": prompt, "threads": threads, "isa": isa, "fa": fa,
                 "model_text": simulate.MODEL, "arms": {}}
    marker = "=== autoresearch cachegrind ==="
    for name, ids in arms.items():
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise ValueError(f"arm {name}: unknown recipes {unknown}")
        variant = f"sim-{name}"
        applied, statuses, _ = stage_variant(tree, workdir, variant, [by_id[i] for i in ids], [])
        missing = [i for i in ids if i not in applied]
        if missing:
            raise RuntimeError(f"arm {name}: {missing} did not apply: {[statuses[i]['reason'] for i in missing]}")
        bins = build(workdir, variant, jobs, isa, targets=("llama-bench",))
        cmd = (f"{bins / 'llama-bench'} -m {model} -p {prompt} -n 0 -r 1 -t {threads} -fa {fa} -o json")
        t0 = time.time()
        proc = subprocess.run(["bash", "-c", simulate.wrapped_command(cmd, marker)], capture_output=True,
                              text=True, timeout=7200)
        if proc.returncode != 0:
            raise RuntimeError(f"arm {name}: cachegrind run failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        counts = simulate.extract(proc.stdout, marker)
        out["arms"][name] = {"recipes": applied, "command": cmd, **counts.to_dict(),
                             "seconds": round(time.time() - t0, 1)}
        log(f"sim {name}: Ir {counts.get('Ir'):,} cycles {counts.cycles:,} ({time.time() - t0:.0f}s)")
    first = next(iter(out["arms"].values()))
    for arm in out["arms"].values():
        arm["cycles_delta_pct"] = 100.0 * (arm["cycles"] - first["cycles"]) / first["cycles"]
        arm["ir_delta_pct"] = 100.0 * (arm["Ir"] - first["Ir"]) / first["Ir"]
    return out


# ---------------------------------------------------------------------------- 10. MUL_MAT profile

def parse_workloads(spec: str) -> list[tuple[int, int]]:
    """"pp512,pp64,tg16" -> [(512, 0), (64, 0), (0, 16)]: llama-bench (-p, -n) per profiled process."""
    out = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        kind, num = part[:2], part[2:]
        if kind not in ("pp", "tg") or not num.isdigit() or int(num) <= 0:
            raise ValueError(f"bad workload {part!r} (want ppN or tgN, N > 0)")
        out.append((int(num), 0) if kind == "pp" else (0, int(num)))
    if not out:
        raise ValueError("no workloads")
    return out


def mm_macs(spec: dict, layers: int, prompt: int, gen: int) -> dict[str, int]:
    """Multiply-adds of the weight matmuls of one llama-bench process (-r 1: a warm-up run and the
    timed run). A prompt outputs its last token only, so the last layer's FFN (after the
    out_ids GET_ROWS, past the attention output projection) and the output matrix see one row:
    those go to the gemv kernel, the rest to the gemm. Generation is all gemv (its warm-up is one
    token)."""
    d, ff = spec["n_embd"], spec["n_ff"]
    hd = spec.get("head_dim") or d // spec["n_head"]
    q, kv = spec["n_head"] * hd, spec["n_head_kv"] * hd
    attn, ffn, out_row = d * q + 2 * d * kv + q * d, 3 * d * ff, 32000 * d     # make_model's vocabulary
    per_token = attn + ffn
    if prompt:
        gemm = 2 * prompt * ((layers - 1) * per_token + attn)
        gemv = 2 * (ffn + out_row)
    else:
        gemm, gemv = 0, (gen + 1) * (layers * per_token + out_row)
    return {"gemm_macs": gemm, "gemv_macs": gemv, "per_token": per_token}


def mm_summary(cg_file: Path, binary: Path) -> dict:
    """Per-function costs under MUL_MAT (the repacked path, ggml_cpu_extra_compute_forward, plus
    the plain ggml_compute_forward_mul_mat), the hottest kernel per mnemonic and per source line."""
    import callgrind_mm as cm
    prof = cm.parse(cg_file.read_text())
    ev = [e for e in ("Ir", "D1mr", "D1mw", "DLmr", "DLmw") if e in prof.events]

    def counts(c: list[int]) -> dict[str, int]:
        return {e: prof.ev(c, e) for e in ev}

    graph = cm.find_functions(prof, r"^ggml_graph_compute_thread")
    roots = cm.find_functions(prof, r"^(ggml_cpu_extra_compute_forward|ggml_compute_forward_mul_mat)$")
    fa = cm.find_functions(prof, r"^ggml_compute_forward_flash_attn_ext$")
    # callgrind's inclusive costs (call edges) missed 8 Ir per inner-loop pass of the gemm kernel
    # here (its own cost exceeds its one call edge), so an op is the sum of the own costs of the
    # functions only it calls (these sum exactly to the program total) plus its calls into shared ones
    def op(rts: list[str]) -> tuple[set, dict, dict]:
        """An op's own functions, their summed own costs, and its calls into shared functions."""
        own = cm.exclusive_to(prof, rts)
        shared: dict[str, list[int]] = {}
        for (caller, callee), c in prof.calls.items():
            if caller in own and callee not in own:
                row = shared.setdefault(callee, [0] * len(prof.events))
                for i, x in enumerate(c):
                    row[i] += x
        total = {e: sum(counts(prof.self_fn.get(f, []))[e] for f in own) + sum(counts(c)[e] for c in shared.values())
                 for e in ev}
        return own, total, shared

    own, mm_total, shared = op(roots)
    graph_total = op(graph)[1]
    fa_total = op(fa)[1]
    funcs = sorted(({"fn": f, **counts(prof.self_fn.get(f, []))} for f in own), key=lambda r: -r["Ir"])
    shared_rows = sorted(({"fn": f, **counts(c)} for f, c in shared.items()), key=lambda r: -r["Ir"])
    hot = funcs[0]["fn"]
    rows = [(fn, a) for (fn, a) in prof.self_instr if fn == hot]
    lo = min(a for _, a in rows)
    hi = max(a for _, a in rows)
    mnem: dict = {}
    for off in cm.PIE_BASES:
        if lo - off < 0:
            continue
        dump = subprocess.run(["objdump", "-d", f"--start-address={lo - off:#x}", f"--stop-address={hi - off + 16:#x}",
                               str(binary)], capture_output=True, text=True).stdout
        mnem = cm.disassembly(dump)
        if all(a - off in mnem for _, a in rows):
            break
    lines = cm.by_line(prof, hot)
    return {"file": str(cg_file), "events": ev, "total": counts(prof.summary), "graph": graph_total,
            "mul_mat": mm_total, "flash_attn": fa_total, "functions": funcs[:25], "shared": shared_rows[:8],
            "hot": hot,
            "mnemonics": cm.by_mnemonic(prof, hot, mnem), "lines": lines[:40]}


def profile_mm(workdir: Path, shape: str, layers: int, workloads: list[tuple[int, int]], threads: int = 1,
               jobs: int = 2, isa: str = "avx2", fa: int = 1, reuse: bool = False, tree: Path | None = None,
               recipe_ids: tuple[str, ...] = ()) -> dict:
    """callgrind (--dump-instr=yes, --cache-sim=yes with jobs/measure/simulate.py's cache geometry) of one
    llama-bench process per workload on the base tree, or on the base plus `recipe_ids` (staged as
    variant mm-<ids> from `tree`), built for `isa` with -g at Release's -O3."""
    from jobs.measure import simulate
    variant = "baseline"
    if recipe_ids:
        from jobs.research.recipes import load_recipe_set
        by_id = {r.id: r for r in load_recipe_set("llama.cpp")}
        variant = "mm-" + "+".join(recipe_ids)
        applied, statuses, _ = stage_variant(tree, workdir, variant, [by_id[i] for i in recipe_ids], [])
        missing = [i for i in recipe_ids if i not in applied]
        if missing:
            raise RuntimeError(f"{variant}: {missing} did not apply: {[statuses[i]['reason'] for i in missing]}")
    bins = build(workdir, variant, jobs, isa, targets=("llama-bench",), debug=True)
    model = make_shape(shape, layers)
    out: dict = {"model": str(model), "isa": isa, "threads": threads, "fa": fa, "recipes": list(recipe_ids), "runs": {}}
    for prompt, gen in workloads:
        tag = f"pp{prompt}" if prompt else f"tg{gen}"
        suffix = "" if variant == "baseline" else f"-{variant}"
        cg = workdir / f"callgrind-mm-{shape}-{layers}L-{tag}{suffix}.out"
        bench = [str(bins / "llama-bench"), "-m", str(model), "-p", str(prompt), "-n", str(gen), "-r", "1",
                 "-t", str(threads), "-fa", str(fa), "-o", "json"]
        cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--cache-sim=yes", *simulate.CACHES,
               f"--callgrind-out-file={cg}", *bench]
        t0 = time.time()
        if not (reuse and cg.is_file()):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
        summary = mm_summary(cg, bins / "llama-bench")
        summary.update(command=" ".join(cmd), seconds=round(time.time() - t0, 1),
                       macs=mm_macs(SHAPES[shape], layers, prompt, gen))
        out["runs"][tag] = summary
        log(f"profile-mm {tag}: MUL_MAT Ir {summary['mul_mat']['Ir']:,} of graph {summary['graph']['Ir']:,} "
            f"({time.time() - t0:.0f}s)")
    return out


def print_mm(result: dict) -> None:
    for tag, r in result["runs"].items():
        g, mm = r["graph"]["Ir"], r["mul_mat"]["Ir"]
        print(f"\n## {tag}: MUL_MAT {mm:,} Ir = {100 * mm / g:.1f}% of graph compute ({g:,}); "
              f"FLASH_ATTN_EXT {r['flash_attn']['Ir']:,}; program {r['total']['Ir']:,}")
        print(f"MACs: gemm {r['macs']['gemm_macs']:,}, gemv {r['macs']['gemv_macs']:,}\n")
        print("| function (self) | " + " | ".join(r["events"]) + " | % of MUL_MAT Ir |")
        print("|---|" + "---|" * (len(r["events"]) + 1))
        for f in r["functions"]:
            if f["Ir"] * 1000 < mm:
                continue
            print(f"| `{f['fn'][:90]}` | " + " | ".join(f"{f[e]:,}" for e in r["events"]) +
                  f" | {100 * f['Ir'] / mm:.2f}% |")
        for f in r["shared"]:
            print(f"| (shared, calls from MUL_MAT) `{f['fn'][:60]}` | " + " | ".join(f"{f[e]:,}" for e in r["events"]) +
                  f" | {100 * f['Ir'] / mm:.2f}% |")
        print(f"\n{r['hot'][:90]} per mnemonic (Ir): " +
              ", ".join(f"{m} {c:,}" for m, c in list(r["mnemonics"].items())[:24]))
        print("\nper line (file:line Ir): " + "; ".join(f"{fl.rsplit('/', 1)[-1]}:{ln} {c:,}" for fl, ln, c in r["lines"][:20]))


def _result_dict(r) -> dict:
    if hasattr(r, "model_dump"):
        return r.model_dump()
    from dataclasses import asdict, is_dataclass
    return asdict(r) if is_dataclass(r) else dict(vars(r))


def print_report(result: dict) -> None:
    print("\n| fa | metric | baseline t/s | patched t/s | delta | 95% CI | p | MDE | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in result["bench"]["results"]:
        print(f"| {r['fa']} | {r['metric']} | {r['base_mean']:.2f} ± {r['base_sd']:.2f} | "
              f"{r['head_mean']:.2f} ± {r['head_sd']:.2f} | {r['delta_pct']:+.2f}% | "
              f"[{r['ci_low_pct']:+.1f}%, {r['ci_high_pct']:+.1f}%] | {r['p_value']:.3g} | "
              f"{r['mde_pct']:.1f}% | {r['verdict']} ({r['method']}) |")
    for r in result["bench"]["results"]:
        name = f"{r['metric']}_fa{r['fa']}"
        print(f"METRIC {name}_base={r['base_mean']:.3f}")
        print(f"METRIC {name}_head={r['head_mean']:.3f}")
        print(f"METRIC {name}_delta_pct={r['delta_pct']:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=llama_tree.cache_dir() / "ab")
    ap.add_argument("--version", default=llama_tree.DEFAULT_VERSION, help="llama-cpp-python sdist version")
    ap.add_argument("--recipes", default="", help="comma-separated recipe ids (default: all applicable)")
    ap.add_argument("--layers", type=int, default=4, help="model blocks: 4 (quick) or 22 (TinyLlama-1.1B)")
    ap.add_argument("--rounds", type=int, default=6, help="processes per arm and -fa setting")
    ap.add_argument("--fa", default="0,1")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    ap.add_argument("--only", choices=["ops", "perf", "bench", "logits", "profile", "neon", "sim", "profile-mm"],
                    default=None)
    ap.add_argument("--shape", default="tinyllama", help=f"model for bench: {', '.join(SHAPES)}")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="models for --only logits/profile")
    ap.add_argument("--logit-layers", type=int, default=4, help="blocks of the logits-check models")
    ap.add_argument("--profile-layers", type=int, default=0, help="blocks of the profiled models (0: full shape)")
    ap.add_argument("--isa", choices=sorted(ISA_FLAGS), default="native",
                    help="x86 build for --only ops/logits: native (-march=native), avx2, x86-64 (scalar paths)")
    ap.add_argument("--perf-rounds", type=int, default=4, help="test-backend-ops perf processes per arm")
    ap.add_argument("--ops-baseline", action="store_true", help="also run test-backend-ops on the baseline")
    ap.add_argument("--sim-arms", default="base=;tile-pack=fa-tile-pack;k-once=fa-tile-pack,fa-k-pack-once",
                    help="--only sim: NAME=recipe,recipe;... (the first arm is the reference; use --threads 1: "
                         "cachegrind serialises threads and a spinning thread pool would count its waits)")
    ap.add_argument("--sim-prompt", type=int, default=64, help="--only sim: llama-bench -p (with -n 0)")
    ap.add_argument("--mm-workloads", type=parse_workloads, default="pp512",
                    help="--only profile-mm: ppN / tgN per callgrind process, e.g. pp512,pp64,tg16")
    ap.add_argument("--mm-reuse", action="store_true",
                    help="--only profile-mm: summarise an existing callgrind file instead of running again")
    ap.add_argument("--mm-recipes", default="",
                    help="--only profile-mm: profile the base tree plus these recipes (comma-separated) instead")
    args = ap.parse_args(argv)

    tree = llama_tree.ensure_llama_tree(args.version)
    prep = prepare(tree, args.workdir, [r for r in args.recipes.split(",") if r] or None,
                   profile=args.only == "profile")
    shapes = [x for x in args.shapes.split(",") if x]
    result: dict = {"tree": str(tree), "version": args.version, "prepare": prep}
    if args.only in (None, "perf"):
        result["perf"] = ab_perf(prep, args.perf_rounds, args.jobs)
    if args.only in (None, "ops"):
        result["ops"] = check_ops(prep, args.jobs, VARIANTS if args.ops_baseline else ("patched",), args.isa)
    if args.only in (None, "logits"):
        result["logits"] = check_logits(prep, shapes, args.logit_layers, args.threads, args.jobs, isa=args.isa)
    if args.only == "neon":
        result["neon"] = check_neon(prep, shapes, args.jobs)
    if args.only == "profile":
        result["profile"] = profile_report(prep, shapes, args.profile_layers or None, args.threads, args.jobs)
    if args.only == "sim":
        result["sim"] = simulate_arms(tree, args.workdir, parse_arms(args.sim_arms), make_shape(args.shape, args.layers),
                                      args.sim_prompt, args.threads, args.jobs, "avx2" if args.isa == "native" else args.isa)
        print(f"\n{result['sim']['model_text']}\n")
        print("| arm | recipes | Ir | D1mr+D1mw | DLmr+DLmw | simulated cycles | vs first |")
        print("|---|---|---|---|---|---|---|")
        for name, a in result["sim"]["arms"].items():
            print(f"| {name} | {', '.join(a['recipes']) or '-'} | {a['Ir']:,} | {a['D1mr'] + a['D1mw']:,} | "
                  f"{a['DLmr'] + a['DLmw']:,} | {a['cycles']:,} | {a['cycles_delta_pct']:+.3f}% (Ir {a['ir_delta_pct']:+.3f}%) |")
    if args.only == "profile-mm":
        result["profile_mm"] = profile_mm(args.workdir, args.shape, args.layers, args.mm_workloads, args.threads,
                                          args.jobs, "avx2" if args.isa == "native" else args.isa,
                                          reuse=args.mm_reuse, tree=tree,
                                          recipe_ids=tuple(r for r in args.mm_recipes.split(",") if r))
        print_mm(result["profile_mm"])
    if args.only in (None, "bench"):
        model = make_shape(args.shape, args.layers)
        result["bench"] = ab_bench(prep, model, args.rounds, [int(f) for f in args.fa.split(",")],
                                   args.threads, args.jobs)
        result["bench"]["model"] = str(model)
        result["bench"]["threads"] = args.threads
    (args.workdir / "ab-result.json").write_text(json.dumps(result, indent=2, default=str))
    for name, d in prep["detection"].items():
        print(f"recipe {name}: {d['status']}")
    if "ops" in result:
        for r in result["ops"]["ops"]["patched"]:
            print(f"test-backend-ops patched {r['op']}: {r['passed']}/{r['total']} {'OK' if r['ok'] else 'FAIL'}")
    if "perf" in result:
        print("\n| op case (test-backend-ops perf) | baseline us/run | patched us/run | delta | 95% CI | verdict |")
        print("|---|---|---|---|---|---|")
        for r in result["perf"]["results"]:
            print(f"| {r['name']} | {r['base_mean']:.1f} | {r['head_mean']:.1f} | {r['delta_pct']:+.1f}% | "
                  f"[{r['ci_low_pct']:+.1f}%, {r['ci_high_pct']:+.1f}%] | {r['verdict']} |")
    logits_ok = True
    for shape, r in result.get("logits", {}).items():
        for k in ("fused_vs_unfused", "patched_vs_baseline"):
            v = r[k]
            ok = v["argmax_agree"] == 1.0 and v["max_rel"] <= LOGITS_MAX_REL
            logits_ok &= ok
            print(f"logits {shape} {k}: max |diff| {v['max_abs']:.3g} ({v['max_rel']:.2g} of max |logit|), "
                  f"{v['identical_rows']}/{v['rows']} rows identical, argmax {100 * v['argmax_agree']:.1f}% "
                  f"{'OK' if ok else 'FAIL'}")
    if "neon" in result:
        for r in result["neon"]["ops"]:
            print(f"aarch64 (qemu) test-backend-ops patched {r['op']}: {r['passed']}/{r['total']} {'OK' if r['ok'] else 'FAIL'}")
        for shape, v in result["neon"]["logits"].items():
            ok = v["argmax_agree"] == 1.0 and v["max_rel"] <= LOGITS_MAX_REL
            logits_ok &= ok
            print(f"aarch64 (qemu) logits {shape} fused_vs_unfused: max |diff| {v['max_abs']:.3g}, "
                  f"{v['identical_rows']}/{v['rows']} rows identical, argmax {100 * v['argmax_agree']:.1f}% {'OK' if ok else 'FAIL'}")
    for shape, r in result.get("profile", {}).items():
        print(Path(r["markdown"]).read_text())
    if "bench" in result:
        print_report(result)
    return 0 if result.get("ops", {"ok": True})["ok"] and result.get("neon", {"ok": True})["ok"] and logits_ok else 1


if __name__ == "__main__":
    sys.exit(main())
