"""What the yardstick reads of cachegrind, and the shell wrapper that makes it. Pure: words in,
one command line out; the wrapper's output in, per-process counts out (or `SimulateError`).

The workload is target code, assumed to game the count, and Valgrind runs inside its processes
as its uid; so `script` keeps the records apart and `processes` believes only what agrees:

* the workload's stdout/stderr go to `out.log` in a folder of their own (what `/proc/self/fd/1`
  leads to), never next to the records;
* the records go to a folder with a random name inside another random folder which, while the
  workload runs, may only be passed through (mode 0100), the records' folder only written
  (0300): neither is listed without a chmod;
* two records per process, written by Valgrind at its exit: the cachegrind file `cg.<pid>` and
  Valgrind's own log `vg.<pid>` (`--log-file`), whose closing summary (`I refs`, `D1 misses` …)
  repeats the file's nine counts. Each file needs its log and each log its file (a process
  killed by SIGKILL, or still running when the listing is made, has a log and no file), and the
  two must agree count for count;
* only entries named exactly `cg.<pid>`/`vg.<pid>` (a positive pid), regular files, are read;
  anything else in the folder fails the step, named;
* a file has exactly the `events:` line of `EVENTS` and one `summary:` line; every count is a
  plain non-negative integer below 2**63 (its length checked before it is converted);
* the listing is framed by one `begin` and one `end <entries>` line carrying the runner's marker;
  the marker at the start of any other line (something else wrote into the runner's output) fails.

What this does not stop is said in jobs/measure/simrun.py. The number of processes each arm ran is
compared by jobs/measure/simulate.py (`process_problems`).
"""
from __future__ import annotations

import re
import shlex

# What cachegrind (3.19 on x86-64; 3.24 and 3.27 on arm64, --cache-sim=yes) prints on its `events:` line.
EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")
MAX_DIGITS = 19            # 2**63 has 19 digits: a longer word is refused before int() sees it
LIMIT = 2 ** 63
MAX_DIGEST_LINES = 100     # DIGEST lines of the workload passed on (the rest of its output is not)
NAME = re.compile(r"(cg|vg)\.([1-9][0-9]{0,9})")
# Valgrind's closing summary, one line per total (3.19: `I   refs:`, 3.21 on: `I refs:`); the
# D lines split into reads and writes. `==<pid>==` is Valgrind's own prefix (a client's
# VALGRIND_PRINTF lines carry `**<pid>**`).
_NUM = r"[0-9]{1,3}(?:,[0-9]{3})*"
LOG_LINE = re.compile(rf"==([0-9]+)== (I|I1|LLi|D|D1|LLd) +(refs|misses): +({_NUM})"
                      rf"(?: +\( *({_NUM}) rd +\+ *({_NUM}) wr\))? *")
LOG_GREP = r"^==[0-9]+== +(I|I1|LLi|D|D1|LLd) +(refs|misses):"
LOG_TOTALS = ("I refs", "I1 misses", "LLi misses", "D refs", "D1 misses", "LLd misses")
LOG_SPLIT = ("D refs", "D1 misses", "LLd misses")          # printed as `total  (reads rd + writes wr)`
# What a failing run's logs say beyond the banner and the totals (an unhandled instruction, a signal).
LOG_NOISE = (r"^==[0-9]+== *((I|I1|LLi|D|D1|LLd|LL) +(refs|misses|miss rate):.*|Cachegrind, .*|Copyright .*"
             r"|Using Valgrind.*|Command: .*|Parent PID: .*)?$|^--[0-9]+-- warning: (L3 cache found|specified LL"
             r" cache|simulated LL cache)")


class SimulateError(ValueError):
    """The cachegrind output could not be read, or was not what the runner asked for; the message says why."""


def _show(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def count(word: str, where: str) -> int:
    """One count: digits only, fewer than MAX_DIGITS + 1 of them, below LIMIT."""
    if len(word) > MAX_DIGITS or not re.fullmatch(r"[0-9]+", word):
        raise SimulateError(f"{where}: {_show(word, 30)} is not a count (a non-negative integer of at most "
                            f"{MAX_DIGITS} digits)")
    value = int(word)
    if value >= LIMIT:
        raise SimulateError(f"{where}: {value} is not below 2**63")
    return value


def parse_cachegrind(text: str, where: str = "cachegrind output") -> tuple[int, ...]:
    """One cachegrind file (or only its `events:`/`summary:` lines) -> its nine counts, in EVENTS order."""
    lines = text.splitlines()
    events = [line for line in lines if line.startswith("events:")]
    summary = [line for line in lines if line.startswith("summary:")]
    if len(events) != 1 or len(summary) != 1:
        raise SimulateError(f"{where}: {len(events)} events: and {len(summary)} summary: lines, not one of each "
                            "(did valgrind run to the end?)")
    names = tuple(events[0].split(":", 1)[1].split())
    if names != EVENTS:
        raise SimulateError(f"{where}: events {_show(' '.join(names))}, not {' '.join(EVENTS)} (cachegrind with "
                            "--cache-sim=yes)")
    words = summary[0].split(":", 1)[1].split()
    if len(words) != len(EVENTS):
        raise SimulateError(f"{where}: the summary has {len(words)} counts for {len(EVENTS)} events")
    return tuple(count(w, f"{where}, summary {name}") for name, w in zip(EVENTS, words))


def parse_log(text: str, pid: int, where: str) -> tuple[int, ...]:
    """Valgrind's closing summary in the log of process `pid` (only its six total lines, as the
    wrapper prints them) -> the nine counts in EVENTS order."""
    totals: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        m = LOG_LINE.fullmatch(line)
        if m is None or int(m[1]) != pid:
            raise SimulateError(f"{where}: {_show(line)} is not a summary line of process {pid}")
        label = f"{m[2]} {m[3]}"
        split = m[5] is not None
        if label not in LOG_TOTALS or split != (label in LOG_SPLIT) or label in totals:
            raise SimulateError(f"{where}: unexpected or repeated {_show(line)}")
        values = tuple(count(v.replace(",", ""), f"{where}, {label}") for v in m.group(4, 5, 6) if v is not None)
        if split and values[0] != values[1] + values[2]:
            raise SimulateError(f"{where}: {label} {values[0]} is not its reads plus its writes")
        totals[label] = values
    missing = [t for t in LOG_TOTALS if t not in totals]
    if missing:
        raise SimulateError(f"{where}: no {', '.join(missing)} (the process did not end normally: killed by "
                            "SIGKILL, or still running when the workload's first process ended?)")
    (ir,), (i1,), (lli,) = totals["I refs"], totals["I1 misses"], totals["LLi misses"]
    d, d1, lld = totals["D refs"], totals["D1 misses"], totals["LLd misses"]
    return ir, i1, lli, d[1], d1[1], lld[1], d[2], d1[2], lld[2]


def script(command: str, marker: str, valgrind: list[str]) -> str:
    """The bash script that runs `command` under `valgrind` (its tool options) with the records
    kept apart (see the module docstring), then prints the workload's DIGEST lines, then the
    listing `processes` reads. The rest of the workload's output is printed (tail) only when it
    fails, with the tail of Valgrind's logs (where an unhandled instruction is reported). The
    folders are left as they are, readable again (in the sandbox, its /tmp goes with it; outside,
    `cg_annotate` can still read the files)."""
    m = shlex.quote(marker)
    vg = " ".join(valgrind)
    return (
        f'm={m}; o=$(mktemp -d) && p=$(mktemp -d) && d=$(mktemp -d "$p/XXXXXXXXXXXX") || exit 97; '
        'chmod 300 "$d" && chmod 100 "$p" || exit 97; '
        f'{vg} --cachegrind-out-file="$d/cg.%p" --log-file="$d/vg.%p" bash -c {shlex.quote(command)} '
        '>"$o/out.log" 2>&1; rc=$?; chmod 700 "$p" "$d"; shopt -s nullglob dotglob; '
        'if [ $rc -ne 0 ]; then tail -c 3000 "$o/out.log"; for f in "$d"/vg.*; do '
        f'[ -f "$f" ] && [ ! -L "$f" ] && grep -v -E {shlex.quote(LOG_NOISE)} "$f" | tail -n 20; done | tail -c 2000; '
        'exit $rc; fi; '
        f'grep -E "^DIGEST " "$o/out.log" | head -n {MAX_DIGEST_LINES}; '
        'echo "$m begin"; n=0; for f in "$d"/*; do n=$((n+1)); b=${f##*/}; '
        'if [[ $b =~ ^(cg|vg)\\.[1-9][0-9]{0,9}$ ]] && [ -f "$f" ] && [ ! -L "$f" ]; then echo "$m file $b"; '
        'if [[ $b == cg.* ]]; then grep -m 3 -E "^(events|summary):" "$f"; '
        f'else grep -m {len(LOG_TOTALS) + 1} -E "{LOG_GREP}" "$f"; fi; '
        'else printf "%s stray %q\\n" "$m" "$b"; fi; done; echo "$m end $n"')


def before_listing(output: str, marker: str) -> str:
    """What the wrapper printed before its listing (the workload's DIGEST lines)."""
    lines = output.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith(marker)), len(lines))
    return "".join(lines[:first])


def _listing(output: str, marker: str) -> list[tuple[str, str, list[str]]]:
    """The framed listing -> [(kind, name, lines)], kind `file` or `stray`."""
    lines = output.splitlines()
    marked = [i for i, line in enumerate(lines) if line.startswith(marker)]
    if not marked:
        raise SimulateError("the simulated run printed no listing of its cachegrind records (did the wrapper run "
                            "to the end?)")
    first, last = marked[0], marked[-1]
    end = re.compile(re.escape(marker) + r" end [0-9]{1,9}")
    if lines[first] != f"{marker} begin" or not end.fullmatch(lines[last]) or first == last \
            or any(line.strip() for line in lines[last + 1:]) \
            or sum(lines[i] == f"{marker} begin" or bool(end.fullmatch(lines[i])) for i in marked) != 2:
        raise SimulateError("the listing of the cachegrind records is not framed as the runner prints it (one "
                            "begin line, one end line, nothing after): something else wrote into the runner's output")
    entries: list[tuple[str, str, list[str]]] = []
    for line in lines[first + 1:last]:
        if not line.startswith(marker):
            if not entries or entries[-1][0] != "file":
                raise SimulateError(f"the listing holds {_show(line)} outside any record")
            entries[-1][2].append(line)
            continue
        kind, _, name = line[len(marker):].strip().partition(" ")
        if kind not in ("file", "stray") or not name:
            raise SimulateError(f"the listing holds {_show(line)}, which the runner does not print: something "
                                "else wrote into the runner's output")
        entries.append((kind, name, []))
    if len(entries) != int(lines[last].rsplit(" ", 1)[1]):
        raise SimulateError(f"the listing holds {len(entries)} entries where the runner listed "
                            f"{lines[last].rsplit(' ', 1)[1]}: something else wrote into the runner's output")
    return entries


def processes(output: str, marker: str) -> dict[int, tuple[int, ...]]:
    """The wrapper's output -> {pid: nine counts in EVENTS order}, every record checked (see the
    module docstring); SimulateError with the first reason otherwise."""
    files: dict[int, list[str]] = {}
    logs: dict[int, list[str]] = {}
    stray: list[str] = []
    for kind, name, lines in _listing(output, marker):
        found = NAME.fullmatch(name) if kind == "file" else None
        if found is None:
            stray.append(name)
            continue
        table = files if found[1] == "cg" else logs
        if int(found[2]) in table:
            raise SimulateError(f"the listing holds {name} twice: something else wrote into the runner's output")
        table[int(found[2])] = lines
    if stray:
        raise SimulateError(f"the cachegrind folder holds {', '.join(_show(s, 60) for s in stray[:3])}"
                            f"{f' and {len(stray) - 3} more' if len(stray) > 3 else ''}, which the runner did not "
                            "ask for (only cg.<pid> and vg.<pid>, regular files, are read)")
    if not files and not logs:
        raise SimulateError("the simulated run left no cachegrind output")
    alone = sorted(set(files) ^ set(logs))
    if alone:
        pid = alone[0]
        raise SimulateError(f"cg.{pid} has no Valgrind log vg.{pid}" if pid in files else
                            f"vg.{pid} has no cachegrind file cg.{pid} (the process did not end normally: killed by "
                            "SIGKILL, or still running when the workload's first process ended?)")
    out: dict[int, tuple[int, ...]] = {}
    for pid in sorted(files):
        if any(not line.startswith(("events:", "summary:")) for line in files[pid]):
            raise SimulateError(f"cg.{pid}: the listing holds a line the runner's grep does not print")
        counted = parse_cachegrind("\n".join(files[pid]), f"cg.{pid}")
        logged = parse_log("\n".join(logs[pid]), pid, f"vg.{pid}")
        if counted != logged:
            differ = ", ".join(f"{e} {a} vs {b}" for e, a, b in zip(EVENTS, counted, logged) if a != b)
            raise SimulateError(f"cg.{pid}'s summary disagrees with Valgrind's log vg.{pid} (file vs log: {differ}): "
                                "a record was changed after Valgrind wrote it")
        out[pid] = counted
    return out
