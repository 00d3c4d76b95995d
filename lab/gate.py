"""The gate a writer's statement waits at (tests/thrift/gate/IcebergMaintThriftGate.java, a Hive
UDF): compiled here for the thrift conflict tests and the concurrency benchmark alike.

A Spark Thrift Server runs no Python, and MERGE refuses non-deterministic sources, so the gate is
a Hive UDF declared deterministic. One source row of the statement calls it: the UDF creates
`reached-<row id>` in the gate folder, then blocks until `open` exists there (or fails the
statement after its timeout). The statement has planned against its snapshot and not committed:
whatever commits meanwhile truly overlaps it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

GATE_SOURCE = Path(__file__).resolve().parents[1] / "tests" / "thrift" / "gate" / "IcebergMaintThriftGate.java"
GATE_CLASS = "IcebergMaintThriftGate"
JDK_PACKAGE = "openjdk-17-jdk-headless"


def find_javac() -> str:
    """javac, from PATH or $JAVA_HOME; apt-get installs the JDK when only a JRE is there (needs root)."""
    def which() -> str | None:
        return shutil.which("javac") or shutil.which("javac", path=str(Path(os.environ.get("JAVA_HOME", "/")) / "bin"))

    if which() is None and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-q", JDK_PACKAGE], capture_output=True, env=env, timeout=900)
    javac = which()
    if javac is None:
        raise RuntimeError(f"the gate needs javac: apt-get install {JDK_PACKAGE} (a JRE alone has none)")
    return javac


def build_gate_jar(build: Path) -> Path:
    """The gate UDF compiled against the Hive jar pyspark ships (the Thrift Server's own), as a jar in `build`."""
    import pyspark

    [hive_exec] = (Path(pyspark.__file__).parent / "jars").glob("hive-exec-*-core.jar")
    build.mkdir(parents=True, exist_ok=True)
    compiled = subprocess.run([find_javac(), "--release", "8", "-nowarn", "-cp", str(hive_exec), "-d", str(build),
                               str(GATE_SOURCE)], capture_output=True, text=True, timeout=120)
    if compiled.returncode != 0:
        raise RuntimeError(f"javac {GATE_SOURCE.name} failed:\n{compiled.stderr}")
    jar = build / "iceberg_maint_thrift_gate.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        for class_file in build.glob("*.class"):
            archive.write(class_file, class_file.name)
    return jar


def reached(gate_dir: Path) -> bool:
    return any(gate_dir.glob("reached-*"))


def open_gate(gate_dir: Path) -> None:
    (gate_dir / "open").touch()
