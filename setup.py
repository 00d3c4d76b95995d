"""Build hook: the wheel carries the dbt package and the demo's dbt project as package data.

Everything else about the build is in pyproject.toml. `dbt-iceberg-maint demo` builds the
integration project, which installs this dbt package from `../`; in a checkout both are read in
place, from a wheel they come from `dbt_iceberg_maint/_project/` (see dbt_iceberg_maint/runtime/project_files.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# What the dbt package and the demo's project consist of; build output and local state stay out.
PROJECT_FILES = ("dbt_project.yml", "macros", "models", "integration_tests")
IGNORED = shutil.ignore_patterns("target", "dbt_packages", "logs", ".user.yml", "package-lock.yml", "__pycache__")


class BuildPyWithProject(build_py):
    def run(self) -> None:
        super().run()
        destination = Path(self.build_lib) / "dbt_iceberg_maint" / "_project"
        shutil.rmtree(destination, ignore_errors=True)
        destination.mkdir(parents=True)
        for name in PROJECT_FILES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, destination / name, ignore=IGNORED)
            else:
                shutil.copy2(source, destination / name)


setup(cmdclass={"build_py": BuildPyWithProject})
