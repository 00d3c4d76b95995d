"""Headless Debian chromium for screenshots of generated HTML (installed with apt-get if missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dbt_iceberg_maint.errors import RuntimeSetupError


def ensure_chromium() -> str:
    found = shutil.which("chromium")
    if found is None and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, env=env)
        found = shutil.which("chromium")
    if found is None:
        raise RuntimeSetupError("chromium is missing; install it with `apt-get install chromium` (needs root)")
    return found


# A local page needs no network: nothing fetches, updates or syncs in the background.
_QUIET = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--no-first-run")


def screenshot(html_file: Path, png: Path, width: int = 1200, height: int = 1600) -> Path:
    """Render `html_file` in real headless chromium and write a PNG screenshot."""
    binary = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="lab-chromium-") as profile:
        result = subprocess.run(
            [binary, *_QUIET, f"--user-data-dir={profile}", f"--window-size={width},{height}",
             f"--screenshot={png}", html_file.resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    if not png.is_file():
        raise RuntimeSetupError(f"chromium wrote no screenshot (rc={result.returncode}): {result.stderr[-2000:]}")
    return png


def dump_dom(html_file: Path) -> str:
    """The DOM real headless chromium built from `html_file`, serialised."""
    binary = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="lab-chromium-") as profile:
        result = subprocess.run([binary, *_QUIET, f"--user-data-dir={profile}", "--dump-dom",
                                 html_file.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    if result.returncode != 0 or "<html" not in result.stdout:
        raise RuntimeSetupError(f"chromium dumped no DOM (rc={result.returncode}): {result.stderr[-2000:]}")
    return result.stdout
