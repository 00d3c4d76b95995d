"""Which tables a maintenance run takes: the Python twin of iceberg_maintenance's selection
(`_iceberg_maint_selected_models`, `_iceberg_maint_parse_shard`, `_iceberg_maint_shard_of` in
macros/operations/iceberg_maintenance.sql). Pure: a manifest's nodes in, targets out."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.errors import UsageError

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard `k` of `n` (1 <= k <= n): the tables whose shard_of is k."""

    k: int
    n: int

    @classmethod
    def parse(cls, text: str, owner: str = "--shard") -> Shard:
        match = _SHARD.fullmatch(text)
        if match is None or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise UsageError(f"{owner} {text!r}: expected 'K/N' with whole numbers 1 <= K <= N, e.g. '2/4'")
        return cls(int(match.group(1)), int(match.group(2)))

    def holds(self, schema: str, identifier: str) -> bool:
        return shard_of(schema, identifier, self.n) == self.k


def shard_of(schema: str, identifier: str, n: int) -> int:
    """1..n from the md5 of the lower-case `schema.table`: every job that names the table agrees,
    whatever catalog prefix it uses."""
    digest = hashlib.md5(f"{schema}.{identifier}".lower().encode(), usedforsecurity=False).hexdigest()
    return int(digest[:8], 16) % n + 1


@dataclass(frozen=True)
class SelectedNode:
    """A model or source table to maintain. `label` is the selector naming exactly it
    (package.name, or source:<source>.<table>); `named`: the selection named it directly, so its
    table must exist."""

    label: str
    schema: str
    identifier: str
    raw_policy: Any
    named: bool = False


def declared_policy(node: Mapping[str, Any]) -> Any:
    """`_iceberg_maint_model_policy`: meta.iceberg_maint from the node's config, else its meta; None
    when it declares none."""
    config_meta = (node.get("config") or {}).get("meta") or {}
    meta = node.get("meta") or {}
    return config_meta.get("iceberg_maint") if config_meta.get("iceberg_maint") is not None \
        else meta.get("iceberg_maint")


def _is_iceberg_model(node: Mapping[str, Any]) -> bool:
    config = node.get("config") or {}
    return (node.get("resource_type") == "model" and config.get("enabled", True)
            and str(config.get("file_format") or "").lower() == "iceberg"
            and config.get("materialized") in ("table", "incremental"))


def _label(node: Mapping[str, Any]) -> str:
    if node.get("resource_type") == "source":
        return f"source:{node['source_name']}.{node['name']}"
    return f"{node['package_name']}.{node['name']}"


def select_nodes(manifest: Mapping[str, Any], select: Sequence[str] | None = None,
                 shard: Shard | None = None) -> list[SelectedNode]:
    """The Iceberg models and the sources declaring meta.iceberg_maint, or what `select` names:
    model names, package.name, tag:<tag>, source:<source> (its tables declaring a policy),
    source:<source>.<table>; then only `shard`'s tables. A selector naming or selecting nothing (a
    tag no Iceberg model has too) is an error; a shard left empty is not (N jobs on a small lake)."""
    models = [manifest["nodes"][uid] for uid in sorted(manifest.get("nodes") or {})
              if _is_iceberg_model(manifest["nodes"][uid])]
    sources = [manifest["sources"][uid] for uid in sorted(manifest.get("sources") or {})
               if (manifest["sources"][uid].get("config") or {}).get("enabled", True)]
    named: set[str] = set()
    if not select:
        chosen = models + [s for s in sources if declared_policy(s) is not None]
    else:
        chosen = []
        for selector in (s.strip() for s in select):
            if selector.startswith("source:"):
                source_name, dot, table_name = selector[len("source:"):].partition(".")
                matched = [s for s in sources if s.get("source_name") == source_name
                           and (s["name"] == table_name if dot else declared_policy(s) is not None)]
                if not matched:
                    names = ", ".join(sorted({str(s.get("source_name")) for s in sources}))
                    raise UsageError(f"--select {selector!r} names no enabled source table"
                                     f"{'' if dot else ' that declares meta.iceberg_maint'}; sources: {names}")
                if dot:
                    named.update(_label(s) for s in matched)
            else:
                matched = [n for n in models if (selector.startswith("tag:") and selector[4:] in (n.get("tags") or []))
                           or selector in (n["name"], f"{n['package_name']}.{n['name']}")]
                if not matched:
                    what = ("selects no Iceberg model of the project (none has that tag)" if selector.startswith("tag:")
                            else "is not an Iceberg model of the project")
                    raise UsageError(f"--select {selector!r} {what}; Iceberg models: "
                                     f"{', '.join(n['name'] for n in models)}")
                if not selector.startswith("tag:"):
                    named.update(_label(n) for n in matched)
            chosen.extend(n for n in matched if n not in chosen)
    selected = []
    for node in chosen:
        source = node.get("resource_type") == "source"
        identifier = (node.get("identifier") if source else node.get("alias")) or node["name"]
        schema = node.get("schema") or ""
        if shard is None or shard.holds(schema, identifier):
            declared = declared_policy(node)
            selected.append(SelectedNode(_label(node), schema, identifier, {} if declared is None else declared,
                                         named=_label(node) in named))
    return selected


# Tables of the package's own bookkeeping: never maintained as catalog-only tables (a compaction
# of a lease log would merge the commits its arbitration reads: macros/internal/lease.sql; the
# history table is append-only: macros/internal/history.sql).
OWN_TABLES = ("iceberg_maint_leases", "iceberg_maint_history")
_PATTERN = re.compile(r"[A-Za-z0-9_*?\[\]!-]+(\.[A-Za-z0-9_*?\[\]!-]+)+")


@dataclass(frozen=True)
class CatalogSelection:
    """Tables found in the catalog that no dbt node declares (`nodes`, labelled catalog:<ns>.<table>),
    the patterns that matched no table at all, the matched tables left to their dbt node, and the
    tables of the patterns' namespaces that nothing covers (no dbt node, no pattern): nobody
    maintains those."""

    nodes: tuple[SelectedNode, ...]
    unmatched_patterns: tuple[str, ...]
    declared_elsewhere: tuple[str, ...]
    uncovered: tuple[str, ...]

    def check_matched(self, catalog: str) -> CatalogSelection:
        """Self, or a UsageError naming each pattern that matched no table of `catalog` (a typo
        would otherwise maintain nothing and exit 0)."""
        if self.unmatched_patterns:
            raise UsageError("; ".join(f"--include-catalog {pattern!r} matches no table of catalog {catalog}"
                                       for pattern in self.unmatched_patterns))
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"taken": [node.label.removeprefix("catalog:") for node in self.nodes],
                "unmatched_patterns": list(self.unmatched_patterns),
                "left_to_dbt": list(self.declared_elsewhere), "uncovered": list(self.uncovered)}


def check_catalog_patterns(patterns: Sequence[str], owner: str = "--include-catalog") -> list[str]:
    """Each pattern is `namespace.table` with shell wildcards (* ? [...]) in either part."""
    errors = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not _PATTERN.fullmatch(pattern.strip()):
            errors.append(f"{owner} {pattern!r}: expected 'namespace.table' with wildcards * ? [...] "
                          "(e.g. 'raw.*' or 'lake.events_*'), letters, digits and underscores")
    return errors


def declared_relations(manifest: Mapping[str, Any]) -> set[str]:
    """Lower-case `schema.identifier` of every node that names a relation (models of any
    materialisation, seeds, snapshots, sources, enabled or not): the project owns those tables."""
    relations = set()
    for section in ("nodes", "sources", "disabled"):
        entries = manifest.get(section) or {}
        for value in entries.values():
            for node in value if isinstance(value, list) else [value]:
                if not isinstance(node, Mapping) or not node.get("schema"):
                    continue
                identifier = node.get("identifier") or node.get("alias") or node.get("name")
                if identifier:
                    relations.add(f"{node['schema']}.{identifier}".lower())
    return relations


def catalog_nodes(tables: Sequence[str], patterns: Sequence[str], declared: set[str], raw_policy: Any,
                  shard: Shard | None = None, own_tables: Sequence[str] = OWN_TABLES) -> CatalogSelection:
    """The catalog's tables (`namespace.table`) matching `patterns` (case-insensitive) that no dbt
    node declares, with `raw_policy` (the project's policy for them), narrowed to `shard`."""
    from fnmatch import fnmatchcase

    errors = check_catalog_patterns(patterns)
    if errors:
        raise UsageError("; ".join(errors))
    lowered = [p.strip().lower() for p in patterns]
    hits: dict[str, int] = dict.fromkeys(lowered, 0)
    nodes, elsewhere, uncovered = [], [], []
    for table in sorted(tables):
        name = table.lower()
        matching = [p for p in lowered if fnmatchcase(name, p)]
        for pattern in matching:
            hits[pattern] += 1
        schema, _, identifier = table.rpartition(".")
        if identifier.lower() in own_tables:
            continue
        if not matching:
            if name not in declared and any(fnmatchcase(schema.lower(), p.rsplit(".", 1)[0]) for p in lowered):
                uncovered.append(table)
        elif name in declared:
            elsewhere.append(table)
        elif shard is None or shard.holds(schema, identifier):
            nodes.append(SelectedNode(f"catalog:{table}", schema, identifier, raw_policy))
    unmatched = tuple(p for p, pattern in zip(patterns, lowered, strict=True) if hits[pattern] == 0)
    return CatalogSelection(tuple(nodes), unmatched, tuple(elsewhere), tuple(uncovered))
