"""What every benchmark shares, and nothing else: its command line (`--quick`, `--results`, a
count such as `--rounds`), the provenance every results JSON carries (commit, dirty tree, load
average at start and end, machine, versions), and writing `<name>.json` + `<name>.png` and the
summary. `./scripts/bench NAME` runs `benchmarks/NAME.py`; each one's `main` is these calls
around its own measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parent.parent
# Results land here while benchmarks run one after another: they do not make the code dirty.
RESULTS_PATHSPEC = ":(exclude)benchmarks/results"


# ---- the command line ---------------------------------------------------------------------------

def parser(name: str, description: str | None, quick_help: str) -> argparse.ArgumentParser:
    """`./scripts/bench <name>` with the flags every benchmark takes."""
    found = argparse.ArgumentParser(prog=f"./scripts/bench {name}", description=description,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    found.add_argument("--quick", action="store_true", help=quick_help)
    found.add_argument("--results", type=Path, default=RESULTS, help=f"where {name}.json and {name}.png go")
    return found


def count(parser_: argparse.ArgumentParser, flag: str, given: int | None, full: int, quick: int,
          args: argparse.Namespace, least: int = 1) -> int:
    """A count option's value: as given, else the full or the quick default; at least `least`."""
    chosen = given or (quick if args.quick else full)
    if chosen < least:
        parser_.error(f"--{flag} {chosen}: expected a whole number >= {least}")
    return chosen


# ---- provenance ---------------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions(*extra: str) -> dict[str, str | None]:
    """The versions a figure depends on; `extra`: more distributions (e.g. hypothesis)."""
    from dbt_iceberg_maint.runtime.spark import BUNDLED_JAR_NAME

    found = {"python": platform.python_version(), "pyspark": _version("pyspark"), "dbt-core": _version("dbt-core"),
             "dbt-spark": _version("dbt-spark"), "iceberg_runtime": BUNDLED_JAR_NAME,
             "pyarrow": _version("pyarrow"), "pyiceberg": _version("pyiceberg"), "postgresql": _postgres_version()}
    found.update({dist: _version(dist) for dist in extra})
    return found


def _postgres_version() -> str | None:
    from lab.postgres import _bin_dir

    bin_dir = _bin_dir()
    if bin_dir is None:
        return None
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


class LoadSampler:
    """The 1-minute load average every few seconds while a benchmark runs (a shared machine)."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self) -> dict[str, float | int | None]:
        s = self.samples
        return {"samples": len(s), "mean": round(statistics.fmean(s), 2) if s else None,
                "max": round(max(s), 2) if s else None}


def machine(load: LoadSampler | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                             "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}
    if load is not None:
        found["load_average_1m"] = load.figures()
    return found


def git_state(repo: Path = REPO) -> tuple[str | None, bool | None]:
    """(HEAD's commit, whether the tree has uncommitted changes outside benchmarks/results/);
    (None, None) outside a git checkout."""
    def git(*args: str) -> str | None:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
        return out.stdout if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".", RESULTS_PATHSPEC)
    return (commit.strip() if commit else None), (None if status is None else bool(status.strip()))


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass(frozen=True)
class RunStart:
    """What a results JSON records of the moment a benchmark started: the code and the load."""

    commit: str | None
    dirty: bool | None
    load: tuple[float, ...]


def run_start(repo: Path = REPO) -> RunStart:
    commit, dirty = git_state(repo)
    return RunStart(commit, dirty, tuple(load_average()))


def provenance(start: RunStart, load: LoadSampler | None = None,
               versions_: Callable[[], Mapping[str, str | None]] | None = None) -> dict[str, Any]:
    """The provenance every results JSON carries (one shape for all benchmarks): the code's commit
    and whether the tree was dirty when the run started, the load average at start and end
    (1, 5, 15 min; `load_average`: torture.json's `load` is its workload), the machine and the
    versions."""
    return {"commit": start.commit, "dirty": start.dirty,
            "load_average": {"start": list(start.load), "end": load_average()},
            "machine": machine(load), "versions": dict((versions_ or versions)())}


# ---- results ------------------------------------------------------------------------------------

def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def write_results(name: str, figures: Mapping[str, Any], results: Path) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return path


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 100) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def publish(name: str, figures: Mapping[str, Any], results: Path, plot: Callable[[Any, Path], None],
            summary: Callable[[Any], None]) -> Path:
    """`<name>.json` and `<name>.png` in `results`, then the summary table."""
    path = write_results(name, figures, results)
    plot(figures, path.with_suffix(".png"))
    summary(figures)
    return path
