"""Pure: where a platform's measurements ran, typed: `MachineFacts` (`jobs.measure.hostfacts.machine_facts`
and the host's 1-minute load), per platform in `RunState.machines` and `RunSummary.machines`.

`load` is the one field whose form differs between the files: state.json holds the samples (a list),
summary.json their summary ({"min", "max", "mean"}, or {}: `jobs.measure.machine.summarise_load`).
Their JSON form is the objects earlier versions wrote (`jobs.contract.jsonform`): a loaded object
writes back its keys in their order, unknown keys kept in `extra`; a key not there takes the default
its readers always took (None where the report shows "?").
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from jobs.contract.jsonform import Json, JsonRecord, field_names


@dataclass
class MachineFacts(JsonRecord):
    """One platform's machine and its load."""
    cpu: str = ""                            # the CPU model
    cpus: int | None = None
    arch: str = ""                           # x86_64, aarch64
    isa: str | None = None                   # avx512 | avx2 | ... (jobs.measure.machine.isa_level)
    flags: list[str] = field(default_factory=list)     # the SIMD flags that matter, best first
    kernel: str = ""
    compiler: str = ""
    load: list[float] | dict[str, float] = field(default_factory=list)   # state.json: samples; summary.json: summary
    extra: Json = field(default_factory=dict, repr=False)          # bookkeeping (jobs.contract.jsonform)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def with_load(self, load: list[float] | dict[str, float]) -> MachineFacts:
        """The same facts with this load, written last (after any unknown keys), where both files' writers put it."""
        keys = self.keys if self.keys is not None else (*field_names(MachineFacts), *self.extra)
        return replace(self, load=load, keys=(*(k for k in keys if k != "load"), "load"))
