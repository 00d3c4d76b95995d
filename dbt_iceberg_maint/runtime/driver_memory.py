"""The embedded runtime's driver memory (`spark.driver.memory`, the JVM's heap).

In local mode every task runs in the driver JVM, so its heap is all the memory Spark has. Spark's
own default, 1g, is too small for ordinary projects: a date spine of a few thousand partitions
ends in `OutOfMemoryError: Java heap space` and a dead JVM (every later node then fails with
`Connection refused`). The default here is the JVM's own ergonomic choice, a quarter of the
machine's memory (or of the container's limit), clamped to 1g..8g; `DBT_ICEBERG_MAINT_DRIVER_MEMORY`
overrides it (docs/python-cli.md, "Driver memory").

The sizing is pure; `machine_memory_bytes` is the one function that reads the system.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dbt_iceberg_maint.errors import RuntimeSetupError

DRIVER_MEMORY_ENV = "DBT_ICEBERG_MAINT_DRIVER_MEMORY"
DRIVER_MEMORY_CONF = "spark.driver.memory"
MIB = 1024 * 1024
GIB = 1024 * MIB
MIN_DEFAULT_BYTES = 1 * GIB
MAX_DEFAULT_BYTES = 8 * GIB
# Spark refuses a driver with less than 450 MiB * 1.5 of system memory ("System memory ... must
# be at least ..."); 512m is the least a user may ask for.
MIN_BYTES = 512 * MIB
STEP_BYTES = 256 * MIB  # the default is rounded down to this, so it reads as 5888m, not 6026m
_UNITS = {"k": 1024, "m": MIB, "g": GIB, "t": 1024 * GIB}
_MEMORY = re.compile(r"(\d+)([kmgt])", re.IGNORECASE)
# cgroup v2, then v1: a container's limit is the machine the JVM really has.
CGROUP_LIMIT_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


@dataclass(frozen=True)
class DriverMemory:
    """The driver memory the embedded runtime starts with, as Spark takes it, and where it came from."""

    value: str  # a JVM memory string: 5888m, 2g
    source: str  # "environment" (DBT_ICEBERG_MAINT_DRIVER_MEMORY) or "machine" (a quarter of it)

    @property
    def bytes(self) -> int:
        return memory_bytes(self.value)


def memory_bytes(value: str) -> int:
    """Bytes of a JVM memory string with a unit (`512m`, `2g`); anything else is refused."""
    match = _MEMORY.fullmatch(value.strip())
    if match is None:
        raise RuntimeSetupError(f"{DRIVER_MEMORY_ENV}={value!r} is not a memory size; expected a whole number "
                                "with a unit k, m, g or t, e.g. 4g or 6144m")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def memory_string(size: int) -> str:
    """`size` bytes as a JVM memory string: whole gibibytes as `Ng`, else mebibytes `Nm`."""
    return f"{size // GIB}g" if size % GIB == 0 else f"{size // MIB}m"


def default_driver_memory(machine_bytes: int) -> str:
    """A quarter of `machine_bytes`, rounded down to 256 MiB, clamped to 1g..8g."""
    quarter = machine_bytes // 4 // STEP_BYTES * STEP_BYTES
    return memory_string(min(max(quarter, MIN_DEFAULT_BYTES), MAX_DEFAULT_BYTES))


def choose_driver_memory(environ: Mapping[str, str], machine_bytes: int) -> DriverMemory:
    """`DBT_ICEBERG_MAINT_DRIVER_MEMORY` when set (checked), else the machine's default."""
    given = environ.get(DRIVER_MEMORY_ENV, "").strip()
    if not given:
        return DriverMemory(default_driver_memory(machine_bytes), "machine")
    if memory_bytes(given) < MIN_BYTES:
        raise RuntimeSetupError(f"{DRIVER_MEMORY_ENV}={given!r} is below the {memory_string(MIN_BYTES)} Spark's "
                                "driver needs; give e.g. 4g")
    return DriverMemory(given, "environment")


def limit_bytes(physical: int, cgroup_limits: list[str]) -> int:
    """The least of the physical memory and any numeric cgroup limit (`max` means none)."""
    limits = [int(text) for text in (t.strip() for t in cgroup_limits) if text.isdigit()]
    return min([physical, *limits])


def machine_memory_bytes() -> int:
    """The memory this process may use: physical memory, or the container's limit when lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limits = []
    for path in CGROUP_LIMIT_FILES:
        try:
            limits.append(path.read_text())
        except OSError:
            continue
    return limit_bytes(physical, limits)


def driver_memory(environ: Mapping[str, str] | None = None) -> DriverMemory:
    """The driver memory of the embedded runtime in this environment."""
    return choose_driver_memory(os.environ if environ is None else environ, machine_memory_bytes())
