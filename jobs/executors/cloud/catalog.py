"""The shipped SkyPilot catalog: prices per instance type, and an offline SkyPilot home.

`data/aws/vms.csv` holds the rows of SkyPilot's AWS catalog (schema v8, the file SkyPilot itself
downloads to `~/.sky/catalogs/v8/aws/vms.csv`) for the instance types autoresearch uses by default,
in three US regions. Prices are the catalog's on-demand `Price` (USD per hour) and `SpotPrice`.

Budgets are hard caps, so `hourly_price` is the highest price of the type among the shipped rows:
an estimate may overshoot a cheaper region a little but never undershoots.

SkyPilot validates a task offline (`sky.Task.from_yaml_config`) but reads its catalog when a task
names an `instance_type`, downloading it when absent. `offline_sky_home()` makes a folder laid out
like a SkyPilot home (`<dir>/.sky/catalogs/v8/aws/vms.csv`, no `.meta` folder so SkyPilot treats
it as user-provided and never re-fetches it); `use_offline_catalog()` points SkyPilot at it via
`SKY_RUNTIME_DIR`. That must happen before `sky` is imported, and is meant for validation only
(tests, `--dry-run`): real launches keep the user's own SkyPilot home and full catalog. We never
write into `~/.sky`, where a partial catalog would shadow the real one.
"""
from __future__ import annotations

import csv
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CATALOG_SCHEMA = "v8"                       # sky.skylet.constants.CATALOG_SCHEMA_VERSION in 0.9-0.14
VMS_CSV = Path(__file__).resolve().parent / "data" / "aws" / "vms.csv"
RUNTIME_DIR_ENV = "SKY_RUNTIME_DIR"          # sky.skylet.constants.SKY_RUNTIME_DIR_ENV_VAR_KEY


class CatalogError(KeyError):
    def __str__(self) -> str:   # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class InstanceType:
    name: str
    cloud: str
    vcpus: float
    memory_gib: float
    arch: str                 # x86_64 | arm64
    price: float              # on-demand USD/hour (highest among shipped regions)
    spot_price: float         # spot USD/hour (highest among shipped zones)
    regions: tuple[str, ...]


@lru_cache(maxsize=1)
def instance_types() -> dict[str, InstanceType]:
    if not VMS_CSV.is_file():
        raise CatalogError(f"the shipped catalog {VMS_CSV} is missing (package data not installed?)")
    rows: dict[str, list[dict[str, str]]] = {}
    with VMS_CSV.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            rows.setdefault(row["InstanceType"], []).append(row)
    out = {}
    for name, group in rows.items():
        out[name] = InstanceType(
            name=name, cloud="aws", vcpus=float(group[0]["vCPUs"]), memory_gib=float(group[0]["MemoryGiB"]),
            arch=group[0]["Arch"], price=max(float(r["Price"]) for r in group),
            spot_price=max(float(r["SpotPrice"] or r["Price"]) for r in group),
            regions=tuple(sorted({r["Region"] for r in group})))
    return out


def lookup(instance_type: str) -> InstanceType:
    known = instance_types()
    if instance_type not in known:
        raise CatalogError(f"instance type {instance_type!r} is not in the shipped catalog {VMS_CSV.name} "
                           f"(known: {', '.join(sorted(known))}); add its rows from SkyPilot's "
                           f"catalogs/{CATALOG_SCHEMA}/aws/vms.csv")
    return known[instance_type]


def hourly_price(instance_type: str, *, spot: bool = False) -> float:
    """USD per hour for one VM of this type, from the shipped catalog."""
    it = lookup(instance_type)
    return it.spot_price if spot else it.price


def offline_sky_home(root: Path | None = None) -> Path:
    """A folder laid out like a SkyPilot home holding only the shipped catalog; returns it."""
    root = Path(root) if root else Path(tempfile.gettempdir()) / f"autoresearch-sky-home-{os.getuid()}"
    dest = root / ".sky" / "catalogs" / CATALOG_SCHEMA / "aws" / "vms.csv"
    if not dest.is_file() or dest.read_bytes() != VMS_CSV.read_bytes():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        shutil.copyfile(VMS_CSV, tmp)
        os.replace(tmp, dest)
    return root


def use_offline_catalog(root: Path | None = None) -> bool:
    """Point SkyPilot (not yet imported) at the shipped catalog. False, changing nothing, when
    SkyPilot is already imported or SKY_RUNTIME_DIR is already set by the user."""
    if "sky" in sys.modules or os.environ.get(RUNTIME_DIR_ENV):
        return False
    os.environ[RUNTIME_DIR_ENV] = str(offline_sky_home(root))
    return True
