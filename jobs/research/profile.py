"""Where a benchmark's time goes: a per-node op profile of one benchmark process, as a research source.

The target is built once with an instrumentation hook (a recipe-format file under `kernels/`,
for llama.cpp `kernels/llama/op-profile.yml`: the CPU backend's graph loop timestamps every node)
and one benchmark process runs with the hook's environment variable naming an output file. The
file holds one block per evaluated graph:

    G <graph> <n_nodes> <n_threads> <total_ns>
    N <idx> <op> <desc> <n_fused> <ns> <type> <ne0> <ne1> <ne2> <ne3> <s0> <s1> <s2> <name>

(`sK`: how many nodes back src[K] was produced, -1 for a leaf or weight). Graphs are grouped
into workloads by their token count (a 512-token prompt is one graph of 512 tokens; generating
128 tokens is 128 graphs of one), and each workload gets the share of time per op type and per
node sequence a hypothesis would fuse. The share bounds the hypothesis (Amdahl): if the part of
the sequence a change can remove took no time at all, the workload would get at most
1/(1 - share) faster (in a chain of several ops the matmul and attention nodes stay: KEPT_OPS).

Everything here is pure (text in, numbers and Markdown out); `jobs.research.profile_run.measure` is
the adapter that builds the instrumented copy and runs the process.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from jobs.guard.mdsafe import Markdown, code, document, join, md, spans

# Ops whose arithmetic a graph-level fusion keeps: fusing MUL_MAT+MUL_MAT+GLU can share the
# input's quantization and drop the GLU pass, not make the matmuls cheaper. In a sequence of
# two or more ops their time is not counted as removable; a one-op hypothesis (a faster
# kernel for that op) can remove all of its op's time.
KEPT_OPS = frozenset({"MUL_MAT", "MUL_MAT_ID", "FLASH_ATTN_EXT"})
MAX_PROFILE_BYTES = 512 * 2**20       # a profile of one benchmark process is a few MiB
_METRIC_TOKENS = re.compile(r"^(pp|tg)(\d+)$")


class ProfileError(ValueError):
    """The profile text is malformed; the message names the line."""


@dataclass(frozen=True)
class Node:
    idx: int
    op: str
    desc: str
    n_fused: int          # further nodes this one's kernel computed (0: not fused)
    ns: int               # wall time from its start to the next computed node's start
    type: str
    ne: tuple[int, int, int, int]
    src: tuple[int, int, int]      # absolute node index of src[0..2], -1 when not a recent node
    name: str


@dataclass
class Graph:
    seq: int
    n_threads: int
    total_ns: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Tokens this graph evaluated: the row count of the input embedding (llama names it
        `inp_embd`), else of the first node."""
        for node in self.nodes:
            if node.name == "inp_embd":
                return node.ne[1]
        return self.nodes[0].ne[1] if self.nodes else 0


def parse(text: str) -> list[Graph]:
    """Graphs from a profile file; raises ProfileError naming the first bad line."""
    graphs: list[Graph] = []
    expected: list[int] = []              # node count each graph header announced
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        kind = line[0]
        try:
            if kind == "G":
                _, seq, n_nodes, n_threads, total = line.split()
                graphs.append(Graph(int(seq), int(n_threads), int(total)))
                expected.append(int(n_nodes))
            elif kind == "N":
                if not graphs:
                    raise ProfileError(f"line {lineno}: node before any graph header")
                parts = line.split(" ", 14)
                if len(parts) != 15:
                    raise ValueError(f"{len(parts)} fields, expected 15")
                _, idx, op, desc, fused, ns, typ, n0, n1, n2, n3, s0, s1, s2, name = parts
                i = int(idx)
                if i != len(graphs[-1].nodes):
                    raise ValueError(f"node index {i}, expected {len(graphs[-1].nodes)}")
                rel = [int(s0), int(s1), int(s2)]
                src = tuple(i - r if r > 0 else -1 for r in rel)
                graphs[-1].nodes.append(Node(i, op, desc, int(fused), int(ns), typ,
                                             (int(n0), int(n1), int(n2), int(n3)), src, name))
            else:
                raise ValueError(f"unknown record {kind!r}")
        except ProfileError:
            raise
        except ValueError as exc:
            raise ProfileError(f"line {lineno}: {exc}: {line[:120]!r}") from None
    for g, expect in zip(graphs, expected):
        if expect != len(g.nodes):
            raise ProfileError(f"graph {g.seq}: header says {expect} nodes, found {len(g.nodes)} (truncated file?)")
    return graphs


# -- sequences ------------------------------------------------------------------------------------

def _linked(window: list[Node], k: int) -> bool:
    """Node k of a window belongs to the chain: it reads an earlier window node, or it is a
    sibling (same op, same input) of an earlier one, as the gate and up projections of one FFN."""
    members = {n.idx for n in window[:k]}
    if any(s in members for s in window[k].src if s >= 0):
        return True
    siblings = {s for n in window[:k] if n.op == window[k].op for s in n.src if s >= 0}
    return any(s in siblings for s in window[k].src if s >= 0)


def find_sequence(graph: Graph, ops: tuple[str, ...]) -> list[list[int]]:
    """Node-index windows of `graph` where `ops` occur consecutively and chained."""
    out: list[list[int]] = []
    n, k = len(graph.nodes), len(ops)
    i = 0
    while i + k <= n:
        window = graph.nodes[i:i + k]
        if all(node.op == op for node, op in zip(window, ops)) and all(_linked(window, j) for j in range(1, k)):
            out.append([node.idx for node in window])
            i += k
        else:
            i += 1
    return out


def sequences_ns(graph: Graph, sequences: Iterable[tuple[str, ...]]) -> tuple[int, int, int]:
    """(time, removable time, occurrences) of the union of the windows of every sequence in one
    graph; removable leaves out KEPT_OPS members of sequences longer than one op."""
    covered: set[int] = set()
    kept: set[int] = set()
    count = 0
    for ops in sequences:
        for window in find_sequence(graph, tuple(ops)):
            if not covered.intersection(window):
                count += 1
            covered.update(window)
            if len(ops) > 1:
                kept.update(i for i in window if graph.nodes[i].op in KEPT_OPS)
    total = sum(graph.nodes[i].ns for i in covered)
    return total, total - sum(graph.nodes[i].ns for i in kept), count


# -- workloads ------------------------------------------------------------------------------------

@dataclass
class Workload:
    name: str                  # a metric name (pp512, tg128) or "tokens=N"
    tokens: int
    graphs: list[Graph]
    skipped: int = 0           # warm-up graphs left out

    @property
    def total_ns(self) -> int:
        return sum(g.total_ns for g in self.graphs)

    @property
    def node_ns(self) -> int:
        return sum(n.ns for g in self.graphs for n in g.nodes)

    def by_op(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.graphs:
            for n in g.nodes:
                if n.ns:
                    key = n.op if n.op not in ("UNARY", "GLU") else f"{n.op}({n.desc})"
                    out[key] = out.get(key, 0) + n.ns
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def share(self, sequences: Iterable[tuple[str, ...]]) -> tuple[float, float, float]:
        """(share of this workload's time, occurrences per graph, removable share) of the union
        of `sequences`."""
        seqs = [tuple(s) for s in sequences]
        ns = removable = count = 0
        for g in self.graphs:
            t, r, c = sequences_ns(g, seqs)
            ns, removable, count = ns + t, removable + r, count + c
        total = self.total_ns
        return ((ns / total if total else 0.0), (count / len(self.graphs) if self.graphs else 0.0),
                (removable / total if total else 0.0))

    def fused_groups(self) -> dict[str, float]:
        """Kernels that computed several nodes (the tree's own fusions), per graph, by op sequence."""
        out: dict[str, int] = {}
        for g in self.graphs:
            for n in g.nodes:
                if n.n_fused:
                    key = "+".join(m.op for m in g.nodes[n.idx:n.idx + n.n_fused + 1])
                    out[key] = out.get(key, 0) + 1
        return {k: v / len(self.graphs) for k, v in sorted(out.items())} if self.graphs else {}


def metric_tokens(names: Iterable[str], explicit: dict[str, int] | None = None) -> dict[str, int]:
    """Metric name -> tokens per graph: the config's mapping, else ppN -> N and tgN -> 1."""
    out = dict(explicit or {})
    for name in names:
        m = _METRIC_TOKENS.match(name)
        if name not in out and m:
            out[name] = int(m.group(2)) if m.group(1) == "pp" else 1
    return out


def workloads(graphs: list[Graph], names: dict[str, int] | None = None, skip_warmup: bool = True) -> list[Workload]:
    """Graphs grouped by token count, named after the metric that measures them. The first graph
    of each group is a warm-up (page faults, cold caches) when the group has more than one."""
    by_tokens: dict[int, list[Graph]] = {}
    for g in graphs:
        by_tokens.setdefault(g.tokens, []).append(g)
    label = {tokens: name for name, tokens in (names or {}).items()}
    out = []
    for tokens, group in sorted(by_tokens.items(), key=lambda kv: -kv[0]):
        skipped = 1 if skip_warmup and len(group) > 1 else 0
        out.append(Workload(label.get(tokens, f"tokens={tokens}"), tokens, group[skipped:], skipped))
    return out


# -- the profile as a research source ----------------------------------------------------------

def amdahl_pct(share: float) -> float:
    """Best-case speed-up (%) of the whole workload if a part taking `share` of it took no time."""
    if share >= 1.0:
        return float("inf")
    return 100.0 * share / (1.0 - share)


@dataclass
class Bound:
    workload: str
    share: float          # of the workload's time, every node of the sequence
    per_graph: float
    removable: float      # the part a fusion can remove (KEPT_OPS members left out)
    not_acting: str = ""  # why the change does not act on this workload (then the bound is 0)

    @property
    def pct(self) -> float:
        return 0.0 if self.not_acting else amdahl_pct(self.removable)

    def sentence(self, ops: str) -> str:
        if self.not_acting:
            return f"{ops} takes {100 * self.share:.1f}% of {self.workload}, but {self.not_acting} (bound 0%)"
        if self.per_graph == 0:
            return f"{ops} does not occur in {self.workload} (bound 0%)"
        kept = (f", {100 * self.removable:.1f}% outside the matmul/attention nodes a fusion keeps"
                if self.removable < self.share else "")
        return (f"{ops} takes {100 * self.share:.1f}% of {self.workload} ({self.per_graph:g} per graph){kept}: "
                f"at best +{self.pct:.1f}%")


@dataclass
class Profile:
    workloads: list[Workload]
    command: str = ""
    cpu: str = ""
    notes: list[str] = field(default_factory=list)

    def workload(self, name: str) -> Workload | None:
        return next((w for w in self.workloads if w.name == name), None)

    def bounds(self, sequences: Iterable[tuple[str, ...]],
               not_acting: Callable[[Workload], str] | None = None) -> list[Bound]:
        """One bound per workload; `not_acting(workload)` says why a change cannot act on that
        workload ("" when it can), and such a workload's bound is 0."""
        seqs = [tuple(s) for s in sequences]
        return [Bound(w.name, *w.share(seqs), not_acting=not_acting(w) if not_acting else "")
                for w in self.workloads]

    def to_dict(self) -> dict:
        """Plain data for state/summary (pr.md renders it with jobs.report.report.profile_section)."""
        return {"command": self.command, "cpu": self.cpu, "notes": list(self.notes), "workloads": [
            {"name": w.name, "tokens": w.tokens, "graphs": len(w.graphs), "skipped": w.skipped,
             "total_ms": round(w.total_ns / 1e6, 3), "threads": w.graphs[0].n_threads if w.graphs else 0,
             "by_op": {k: round(v / w.total_ns, 5) for k, v in w.by_op().items()} if w.total_ns else {},
             "fused_per_graph": w.fused_groups()} for w in self.workloads]}


def from_text(text: str, metric_names: Iterable[str], explicit: dict[str, int] | None = None) -> Profile:
    graphs = parse(text)
    if not graphs:
        raise ProfileError("the profile holds no graphs (did the benchmark run with the hook's variable set?)")
    return Profile(workloads(graphs, metric_tokens(metric_names, explicit)))


HYPOTHESIS_FLOOR_FACTOR = 0.1     # score multiplier of a hypothesis whose sequence never runs


def rank_factor(bound_pct: float, floor_pct: float) -> float:
    """Multiplier on a hypothesis's score from its Amdahl bound on the primary workload: a bound
    below the smallest effect the measurement calls a win (`thresholds.min_effect_pct`) can never
    produce a kept result, so the score shrinks towards 10% as the bound goes to 0; at or above it
    the score stays. rank_bonus then orders the viable ones by where the time goes."""
    floor_pct = max(floor_pct, 1e-6)
    viable = min(1.0, max(0.0, bound_pct) / floor_pct)
    return HYPOTHESIS_FLOOR_FACTOR + (1 - HYPOTHESIS_FLOOR_FACTOR) * viable


RANK_BONUS_PER_DOUBLING = 1.5   # points per doubling of (1 + bound%)
RANK_BONUS_BOUND_CAP = 30.0      # bound % past which more share says nothing about a change's gain


def rank_bonus(bound_pct: float) -> float:
    """Points for where the time goes: 1.5 x log2(1 + bound%), the bound capped at 30%. Taken
    together with the kind weights (fusion 3, parallelism 2, micro 0.5) as log-scale points, this
    ranks by kind x bound: a micro change outranks a fusion once its 1 + bound% is about 3.2x the
    fusion's (2^(2.5/1.5)), and at equal bounds the kind orders. The linear +0.3/percent capped at
    +3 this replaces put a micro change to flash attention (bound +27%) below a QK-norm fusion
    that could win at most 1.7% (3.5 vs 3.51 on a Qwen3 run), i.e. below a change the run could
    not even detect. The cap keeps an op that takes most of the time (MUL_MAT, bound +300%) from
    outranking every kind on share alone: a change to it is usually a small part of that op."""
    bound = min(max(bound_pct, 0.0), RANK_BONUS_BOUND_CAP)
    return RANK_BONUS_PER_DOUBLING * math.log2(1.0 + bound)


# -- rendering ------------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render(profile: Profile, sequences: dict[str, list[tuple[str, ...]]], top: int = 12) -> list[Markdown]:
    """Markdown lines for research.md: share per op type, and per fusable sequence with its bound
    (the command, workload and op names are the target's: `md` escapes them)."""
    out = [md("## Where the time goes (op profile of one benchmark process)"), md("")]
    if profile.command:
        out.append(md("Profiled: {}{}.", code(profile.command, 2000),
                      md(" on {}", profile.cpu) if profile.cpu else md("")))
    for w in profile.workloads:
        thr = w.graphs[0].n_threads if w.graphs else 0
        out.append(md("- {}: {} graph(s) of {} token(s), {:.1f} ms in graph evaluation, {} thread(s){}", w.name,
                      len(w.graphs), w.tokens, w.total_ns / 1e6, thr,
                      md(" ({} warm-up graph left out)", w.skipped) if w.skipped else md("")))
    out += [md("")]
    names = [w.name for w in profile.workloads]
    ops: list[str] = []
    for w in profile.workloads:
        for op in w.by_op():
            if op not in ops:
                ops.append(op)
    out += [md("| op | {} |", join(" | ", names)), md("|---|{}", document([md("---|")] * len(names), sep=""))]
    shares = {w.name: w.by_op() for w in profile.workloads}
    for op in ops[:top]:
        cells = [(_pct(shares[w.name].get(op, 0) / w.total_ns) if w.total_ns else "—") for w in profile.workloads]
        out.append(md("| {} | {} |", op, join(" | ", cells)))
    if len(ops) > top:
        out.append(md("| … {} more | {} |", len(ops) - top, join(" | ", ["" for _ in names])))
    out.append(md(""))
    if sequences:
        out += [md("Fusable node sequences (the hypotheses' op sequences found chained in the graphs): share of "
                   "each workload's time and the Amdahl bound, the speed-up if the sequence took no time. "
                   "In a chain of two or more ops the matmul / flash-attention nodes stay (a fusion removes "
                   "the passes around them), so only the rest counts as removable."), md(""),
                md("| sequence | {} |", join(" | ", [md("{}: per graph, share, bound", n) for n in names])),
                md("|---|{}", document([md("---|")] * len(names), sep=""))]
        for label, seqs in sequences.items():
            cells = []
            for b in profile.bounds(seqs):
                share = _pct(b.share) + (f" ({_pct(b.removable)} removable)" if b.removable < b.share else "")
                cells.append("not found" if b.per_graph == 0 else f"{b.per_graph:g}, {share}, +{b.pct:.1f}%")
            out.append(md("| {} | {} |", label, join(" | ", cells)))
        out.append(md(""))
    fused = {w.name: w.fused_groups() for w in profile.workloads}
    if any(fused.values()):
        out.append(md("Fused in the profiled tree (kernels that computed several nodes, per graph): {}.", join("; ", [
            md("{}: {}", name, join(", ", [md("{} ×{:g}", k, v) for k, v in groups.items()]))
            for name, groups in fused.items() if groups])))
        out.append(md(""))
    out += [md("- {}", spans(n)) for n in profile.notes] + ([md("")] if profile.notes else [])
    return out


def digest(profile: Profile, sequences: dict[str, list[tuple[str, ...]]]) -> str:
    lines = []
    for w in profile.workloads:
        ops = ", ".join(f"{op} {_pct(ns / w.total_ns)}" for op, ns in list(w.by_op().items())[:10]) if w.total_ns else ""
        lines.append(f"{w.name} ({len(w.graphs)} graphs of {w.tokens} tokens): {ops}")
    for label, seqs in sequences.items():
        lines.append(f"{label}: " + "; ".join(b.sentence(label) for b in profile.bounds(seqs)))
    return "\n".join(lines)
