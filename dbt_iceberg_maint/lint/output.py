"""Text output for people: findings grouped by model, each with its suggestion (pure)."""

from __future__ import annotations

from itertools import groupby

from dbt_iceberg_maint.lint.rules import SEVERITIES, LintResult


def render_text(result: LintResult) -> str:
    lines: list[str] = []
    ordered = sorted(result.findings, key=lambda f: f.node)
    for node, group in groupby(ordered, key=lambda f: f.node):
        lines.append(node)
        for finding in sorted(group, key=lambda f: (SEVERITIES.index(f.severity), f.rule)):
            lines.append(f"  {finding.severity:<7} {finding.rule}: {finding.message}")
            lines.append(f"          fix: {finding.suggestion}")
        lines.append("")
    counts = {s: sum(1 for f in result.findings if f.severity == s) for s in SEVERITIES}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items())
    silenced = f"; {len(result.silenced)} silenced by meta.iceberg_maint.lint_ignore" if result.silenced else ""
    lines.append(f"{result.models} model(s) checked: {summary}{silenced}")
    return "\n".join(lines)
