"""Every Python path the docs name keeps working while modules move (issue 56), and no module of
the product is over 400 lines.

A dotted `dbt_iceberg_maint.<name>...` in README.md or docs/*.md is either a macro
or generic test (`dbt_iceberg_maint.maintain`) or a Python path, which must import: a module, or a module and the
attributes after it. `from dbt_iceberg_maint... import a, b` lines must import too, and a
`dbt_iceberg_maint/...` file the docs cite must exist; a module the docs run with `python -m` must
still run. The top level holds the ground floor and, for a moved module whose old path the docs
name, a re-export (imports, `__all__` and a `__main__` guard only).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = "dbt_iceberg_maint"
# No module of the product is longer (issue 56).
LINE_LIMIT = 400


def _text() -> str:
    return "\n".join(page.read_text() for page in PAGES)


def _macro_names() -> set[str]:
    """The dbt package's macros and generic tests (`{% test name %}`)."""
    names: set[str] = set()
    for path in (ROOT / "macros").rglob("*.sql"):
        names.update(re.findall(r"\{%-?\s*(?:macro|test)\s+(\w+)", path.read_text()))
    return names


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent is not a package
        return False


def _resolve(path: str) -> object:
    """The module or attribute `path` names; raises when it names nothing."""
    parts = path.split(".")
    # The longest prefix that is a module, then attributes.
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if _is_module(module_name):
            found: object = importlib.import_module(module_name)
            for attribute in parts[cut:]:
                found = getattr(found, attribute)
            return found
    raise ModuleNotFoundError(path)


def _dotted_python_paths() -> list[str]:
    macros = _macro_names()
    paths = set()
    for path in re.findall(rf"\b{PACKAGE}(?:\.[A-Za-z_]\w*)+", _text()):
        first = path.split(".")[1]
        if not _is_module(f"{PACKAGE}.{first}") and first in macros:
            continue  # a macro or generic test: dbt_iceberg_maint.maintain(...)
        paths.add(path)
    return sorted(paths)


def _from_imports() -> list[str]:
    paths = set()
    for module, names in re.findall(rf"^\s*from ({PACKAGE}(?:\.\w+)*) import ([\w, ]+)$", _text(), re.MULTILINE):
        paths.update(f"{module}.{name.strip()}" for name in names.split(",") if name.strip())
    return sorted(paths)


def test_the_docs_name_python_paths() -> None:
    # The scan itself works: the documented API is found (a regex gone wrong would pass vacuously).
    documented = set(_dotted_python_paths()) | set(_from_imports())
    assert {f"{PACKAGE}.conflicts.classify", f"{PACKAGE}.invoke.ManifestGraph",
            f"{PACKAGE}.maintenance.run_maintenance", f"{PACKAGE}.fleet.run_fleet",
            f"{PACKAGE}.spark.start_session", f"{PACKAGE}.results.parse_result_lines"} <= documented


@pytest.mark.parametrize("path", _dotted_python_paths() + _from_imports())
def test_documented_python_path_imports(path: str) -> None:
    assert _resolve(path) is not None


@pytest.mark.parametrize("module", sorted(set(re.findall(rf"-m ({PACKAGE}(?:\.\w+)+)", _text()))))
def test_documented_python_m_modules_run(module: str) -> None:
    # `python -m dbt_iceberg_maint.thrift_server start ...`: a re-export left at a moved module's
    # old path must run its main too.
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    assert 'if __name__ == "__main__":' in Path(spec.origin).read_text()


def test_console_script_entry_point_resolves() -> None:
    import click

    from dbt_iceberg_maint.cli import main

    assert isinstance(main, click.Group)
    assert _resolve(f"{PACKAGE}.cli.main") is main
    assert {"run", "classify", "demo", "env", "maintain", "leases", "health", "plan", "report", "lint"} <= set(
        main.commands)


def test_files_the_docs_cite_exist() -> None:
    cited = {match.rstrip(".") for match in re.findall(rf"\b{PACKAGE}/[\w/.]+", _text())}
    assert cited, "the scan found no cited file"
    missing = [path for path in sorted(cited) if not (ROOT / path).exists()]
    assert not missing, f"the docs cite files that do not exist: {missing}"


def test_no_product_module_is_over_the_limit() -> None:
    modules = sorted((ROOT / PACKAGE).rglob("*.py"))
    assert len(modules) > 50
    long = {str(m.relative_to(ROOT)): n for m in modules if (n := len(m.read_text().splitlines())) > LINE_LIMIT}
    assert not long, f"over {LINE_LIMIT} lines: {long}"


# The top level (docs/architecture.md, "Layout"): the ground floor, and re-exports of moved
# modules whose old path the docs name.
GROUND_FLOOR = {"__init__.py", "protocol.py", "errors.py", "guards.py", "text_tables.py", "py.typed"}


def _top_level_files() -> list[Path]:
    return sorted(path for path in (ROOT / PACKAGE).iterdir() if path.is_file())


def _product_imports(tree: ast.Module) -> set[str]:
    """The product modules a module imports at its top (not inside functions)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
    return names


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` running `main()` and nothing else."""
    if not (isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'" and not node.orelse):
        return False
    return [ast.unparse(statement) for statement in node.body] in (
        ["main()"], ["raise SystemExit(main())"], ["sys.exit(main())"])


def test_top_level_holds_the_ground_floor_and_re_exports_only() -> None:
    others = [path for path in _top_level_files() if path.name not in GROUND_FLOOR]
    assert all(path.suffix == ".py" for path in others), f"not a module: {[p.name for p in others]}"
    documented = _text()
    for path in others:
        tree = ast.parse(path.read_text())
        body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
        imported: set[str] = set()
        exported: list[str] = []
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{PACKAGE}."):
                # From the subpackage the module moved to, not from another top-level module.
                assert node.module and node.module.count(".") >= 2, f"{path.name}: imports {node.module}"
                imported.update(alias.asname or alias.name for alias in node.names)
            elif (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]
                  and isinstance(node.value, ast.List | ast.Tuple)):
                exported = [ast.literal_eval(element) for element in node.value.elts]
            else:
                assert _is_main_guard(node), f"{path.name} is not a re-export: {ast.unparse(node)[:80]!r}"
        assert imported and sorted(imported) == sorted(exported), f"{path.name}: __all__ is not what it imports"
        # A re-export stays only where the docs name its path.
        assert f"{PACKAGE}.{path.stem}" in documented, f"{path.name}: no page names {PACKAGE}.{path.stem}"


def test_the_ground_floor_imports_only_the_ground_floor() -> None:
    floor = {f"{PACKAGE}.{name.removesuffix('.py')}" for name in GROUND_FLOOR if name.endswith(".py")}
    for name in sorted(GROUND_FLOOR - {"py.typed", "__init__.py"}):
        imports = _product_imports(ast.parse((ROOT / PACKAGE / name).read_text()))
        assert imports <= floor, f"{name} imports {sorted(imports - floor)}"
