"""The failures in what `dbt-iceberg-maint classify` reads (pure, no I/O).

- A `run_results.json`: each failed result, named by its unique_id.
- A dbt log file or console output: each failed node, named as dbt prints it. dbt announces a
  failure in three forms:
    `Runtime Error in model a (models/a.sql)` (also `Database Error`, `Compilation Error`, ...):
        the message that run_results.json stores, logged by the node's thread and again in the
        end-of-run summary;
    `Failure in model a (models/a.sql)`: the summary's heading before that message;
    `3 of 7 ERROR creating sql table model analytics.a ..... [ERROR in 0.52s]` (or
        `FAIL 2 not_null_a_id`, `ERROR loading seed file ...`): the progress line, which names
        the relation and carries no error text.
  A block is its heading's log record: the heading line and the lines that follow it up to the
  next heading or the next timestamped log line; a progress line is a block of one line, and a
  `Failure in` heading also takes the next record, its message. The blocks that name the same
  node are one failure, so a SQL error in one model is never classified together with a
  conflict in another.
  dbt's structured log (`--log-format json`, one JSON event a line) is read as the same text: each
  event's time and message.
- Any other text (no such heading): one failure, the whole text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from dbt_iceberg_maint.runtime.invoke import FAILED_STATUSES

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# `12:00:01  msg` (console) or `12:00:01.123456 [error] [Thread-1 (]: msg` (logs/dbt.log).
LOG_PREFIX = re.compile(r"^\d{2}:\d{2}:\d{2}(?:\.\d+)? (?:\[[^\]]*\] \[[^\]]*\]: )?")
ERROR_HEADING = re.compile(
    r"^(?:[A-Z][A-Za-z ]*? Error|(?P<summary>Failure)) in [a-z_]+ (?P<name>[^\s()]+) \([^()]*\)$"
)
PROGRESS_LINE = re.compile(
    r"^\d+ of \d+ (?P<status>ERROR|FAIL \d+) (?!hook: )"
    r"(?:creating |loading seed file |snapshotting )?(?P<what>\S(?:.*?\S)?)[ .]*\[(?:ERROR|FAIL)"
)


@dataclass(frozen=True)
class FailureText:
    """One failure to classify: where it comes from, dbt's status for it, and its text."""

    source: str  # a unique_id (run_results.json), a node name (log) or "text"
    status: str
    text: str


def failures_in(content: str) -> tuple[FailureText, ...]:
    """The failures in a run_results.json, a dbt log / console output, or raw text."""
    try:
        document = json.loads(content)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        return tuple(
            FailureText(str(result.get("unique_id")), str(result.get("status")), str(result.get("message") or ""))
            for result in document["results"]
            if isinstance(result, dict) and result.get("status") in FAILED_STATUSES
        )
    text = plain_log(content)
    return split_log(text) or (FailureText("text", "error", text),)


def plain_log(content: str) -> str:
    """A structured dbt log (one JSON event a line) as the text log says it: `HH:MM:SS  msg`
    per event; any other content unchanged."""
    lines = []
    for line in content.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            info = event["info"]
            lines.append(f"{str(info['ts'])[11:19]}  {info['msg']}")
        except (ValueError, KeyError, TypeError):
            return content  # not a structured log
    return "\n".join(lines) if lines else content


# What a block takes after its heading line: nothing (a progress line), the next record if
# indented (the summary's `Failure in ...` heading: dbt logs the message as a record of its own),
# or the lines up to the next record.
Takes = Literal["none", "message", "lines"]


@dataclass(frozen=True)
class _Heading:
    name: str
    status: str
    takes: Takes


def _heading(line: str) -> _Heading | None:
    heading = ERROR_HEADING.match(line)
    if heading:
        return _Heading(heading["name"], "error", "message" if heading["summary"] else "lines")
    progress = PROGRESS_LINE.match(line)
    if progress:
        relation = progress["what"].split()[-1]  # e.g. `sql table model analytics.a`
        name = relation.rsplit(".", 1)[-1].strip("`\"'")
        return _Heading(name, "fail" if progress["status"].startswith("FAIL") else "error", "none")
    return None


def split_log(text: str) -> tuple[FailureText, ...]:
    """One `FailureText` per failed node of a dbt log / console output; () if it names none."""
    blocks: dict[str, list[str]] = {}
    statuses: dict[str, str] = {}
    headed: set[str] = set()  # names with an error heading, not only a progress line
    current: list[str] | None = None  # the open block
    takes: Takes = "none"
    for raw in ANSI_ESCAPE.sub("", text).splitlines():
        prefix = LOG_PREFIX.match(raw)
        line = raw[prefix.end():] if prefix else raw
        heading = _heading(line.strip())
        if heading is not None:
            current = blocks.setdefault(heading.name, [])
            current.append(line.strip())
            if heading.status == "fail" or heading.name not in statuses:
                statuses[heading.name] = heading.status
            if heading.takes != "none":
                headed.add(heading.name)
            takes = heading.takes
        elif current is not None and takes == "message" and prefix and line[:1].isspace() and line.strip():
            current.append(line.strip())
            takes = "lines"
        elif prefix or takes == "none":
            current = None  # another log record: the block has ended
        elif current is not None:
            current.append(line)
    # A progress line names the relation (the alias), a heading the node: where headings exist
    # (dbt's end-of-run summary repeats every failure), a progress line alone adds nothing.
    names = [name for name in blocks if name in headed] or list(blocks)
    return tuple(FailureText(name, statuses[name], "\n".join(blocks[name])) for name in names)
