"""Failure text → exception records (`<class>: <message>`), in every wrapper a user meets.

Only text where an exception really starts is read as a record (see `records_of`): Spark echoes
SQL, plans and data inside its messages, dbt and Spark log SQL, and users raise their own
exceptions, so Iceberg-looking text anywhere else never makes a failure retryable.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from dbt_iceberg_maint.conflicts.thrift import BEELINE_PROMPT, unpack_client_forms


@dataclass(frozen=True)
class Record:
    """One exception found in the text.

    `class_name` is None for a message printed without its class: PySpark's captured
    exceptions (IllegalArgumentException, AnalysisException) print only the Java message, and
    dbt prints the message of the error it wraps. `cause_visible`: a `Caused by:` of this
    record (or a cause chained on its line) is in the text.
    """

    class_name: str | None
    message: str
    cause_visible: bool = False

    @property
    def simple_name(self) -> str:
        return (self.class_name or "").rsplit(".", 1)[-1].rsplit("$", 1)[-1]

    @property
    def java_class(self) -> str | None:
        """The Java class behind the record: PySpark re-raises some as its own classes."""
        return _PYSPARK_CAPTURED.get(self.class_name or "", self.class_name)


_CLASS = r"(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error)"
# An exception header where a record starts: `<class>: `, or Spark Connect's `(<class>) `;
# the Thrift server prefixes `Error running query: ` to the exception's `toString()`.
_HEADER = re.compile(
    rf"(?:Error running query: )?(?:\((?P<paren>{_CLASS})\)[ \t]+|(?P<plain>{_CLASS}):[ \t]*)"
)
# A line that ends the message before it: a Java or Python stack frame.
_FRAME = re.compile(
    r"[ \t]*(?:at [\w$.<>/]+\(|\.\.\. \d+ (?:more|elided)|Traceback \(most recent call last\):"
    r"|File \"[^\"\n]*\", line \d+)"
)
_CAUSE = re.compile(r"[ \t]*(?P<via>Caused by|Suppressed): ")
# A line after which a Java stack trace starts: py4j's `Py4JJavaError` ("...calling o87.sql.\n:
# <trace>") and PySpark's captured exceptions with spark.sql.pyspark.jvmStacktrace.enabled.
_TRACE_ANNOUNCEMENT = re.compile(
    r"(?:(?:py4j\.protocol\.)?Py4JJavaError: )?An error occurred while calling \S+\.|JVM stacktrace:"
)
_TRACE_START = re.compile(r"[ \t]*(?:: )?")
# dbt's `<Type> Error[ in <node>]` title: the lines below it are the message of the error it wraps.
_DBT_TITLE = re.compile(r"(?:^|: )[A-Z][a-z]+ Error(?: in \w+ .*)?$")
_DBT_LOG_LINE = re.compile(r"\d\d:\d\d:\d\d(?:\.\d+)?[ \t]+(?:\[[^\]\n]*\][ \t]+\[[^\]\n]*\]:[ \t]?)?")
_LOG4J_LINE = re.compile(
    r"\d{2,4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d\S*[ \t]+(?:\[[^\]\n]*\][ \t]+)?"
    r"(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b"
)
# Iceberg logs every CommitFailedException it retries (WARN Tasks: Retrying task after failure):
# below ERROR a logged exception is not the failure.
_QUIET_LEVELS = frozenset({"TRACE", "DEBUG", "INFO", "WARN", "WARNING"})
# User Python code can print anything, including Iceberg-looking text: never read it.
# A Python worker's traceback: in the JVM's text after `PythonException:`, and in PySpark's own
# text (a captured PythonException prints the worker's sentence, no class). A driver-side
# traceback (Py4JJavaError with the Java exception after it) has neither and stays readable.
_PYTHON_WORKER = r"An exception was thrown from the Python worker\. Please see the stack trace below\."
_PYTHON_TRACEBACK = re.compile(
    rf"((?:PythonException:\s*)(?:{_PYTHON_WORKER}\s*)?|{_PYTHON_WORKER}\s*)Traceback \(most recent call last\):.*?"
    r"(?=\n[ \t]*at [\w$.<>/]+\(|\n[ \t]*Caused by:|\Z)",
    re.DOTALL,
)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The JVM launcher's notice, printed first on stderr when JAVA_TOOL_OPTIONS, _JAVA_OPTIONS or
# JDK_JAVA_OPTIONS is set: no part of any message. beeline's prompt on stdout may come right
# before it on the same line; the prompt stays, on the line the error then continues.
_JVM_NOTICE = re.compile(
    rf"^((?:{BEELINE_PROMPT})?)(?:NOTE: )?Picked up (?:JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS): [^\n]*\n?",
    re.MULTILINE,
)

# PySpark raises these Java exceptions as its own classes (printing the Java message only).
_PYSPARK_CAPTURED: dict[str, str] = {
    f"{module}.IllegalArgumentException": "java.lang.IllegalArgumentException"
    for module in (
        "pyspark.errors.exceptions.captured",  # classic (py4j)
        "pyspark.errors.exceptions.connect",  # Spark Connect
        "pyspark.sql.utils",  # PySpark <= 3.3
    )
}



@dataclass
class _Draft:
    """A record while `_records` collects its message lines."""

    chain: int  # records of one chain: an exception, its causes and what wraps it
    class_name: str | None
    is_cause: bool = False
    lines: list[str] = field(default_factory=list)


def records_of(text: str) -> list[Record]:
    """The exception records of `text`, in order.

    A record starts only where an exception really starts: at the start of a line that is not
    inside another record's message; after `Caused by: ` or `Suppressed: `; on the line that
    py4j (`An error occurred while calling o87.sql.` + `: `) or PySpark (`JVM stacktrace:`)
    announces a Java trace; chained at the start of a record's message (Java prints an
    exception made from a cause as `Outer: Inner: message`, Thrift as `HiveSQLException: Error
    running query: Inner: message`, Spark Connect as `(Inner) message`); or on the first line of
    a dbt error's message. A message runs until a stack frame, a log line or the next record:
    whatever else it contains (Spark's SQL echo and plans, data values, a user's text) is
    message, never a record. A message at the start of the text or of a dbt log line with no
    class before it is a record of its own (PySpark prints captured exceptions that way).
    An exception on the line after a log4j line is the one it logs (log4j prints `%m%n%ex`): it
    and its causes are dropped when the level is below ERROR.
    """
    scanner = _Scanner()
    for raw in _normalised(text).splitlines():
        scanner.feed(raw)
    return _freeze(scanner.drafts, scanner.quiet_chains)


def _normalised(text: str) -> str:
    text = _ANSI_ESCAPE.sub("", text)  # dbt colours its console log
    text = _JVM_NOTICE.sub(r"\1", text)
    text = unpack_client_forms(text)  # PyHive's packed status, beeline's decorations
    return _PYTHON_TRACEBACK.sub(r"\1<python traceback>", text)


class _Scanner:
    """`records_of`'s reading of one line after another: each kind of line has its handler."""

    def __init__(self) -> None:
        self.drafts: list[_Draft] = []
        self.quiet_chains: set[int] = set()
        self._chains = itertools.count()
        self.chain = next(self._chains)
        self.current: _Draft | None = None  # the record whose message the next line continues
        self.opening = False  # the next non-blank line may be the error the dbt error `current` wraps
        self.fresh = True  # at the start of the text or of a dbt log message
        self.logged = False  # the previous line is a log4j line: an exception here is the one it logs
        self.previous = ""  # the previous line, for py4j's and PySpark's trace announcements

    def feed(self, raw: str) -> None:
        if log := _LOG4J_LINE.match(raw):
            self._log_line(log["level"])
            return
        line = raw
        if dbt := _DBT_LOG_LINE.match(raw):
            self.current, self.opening, self.fresh, line = None, False, True, raw[dbt.end() :]
        content = line.strip()
        cause = _CAUSE.match(line)
        trace = _TRACE_START.match(line) if _TRACE_ANNOUNCEMENT.fullmatch(self.previous) else None
        header = _HEADER.match(content)
        title = header is None and _DBT_TITLE.search(content) is not None
        if _FRAME.match(line):  # the message ends; a `Caused by:` may follow
            self.current, self.opening = None, False
        elif cause:  # Java's own structure, even inside a message
            self._cause(line, cause)
        elif trace and _HEADER.match(line, trace.end()):
            self.current, self.opening = self._start(line[trace.end() :], self.chain, True), False
        elif self.current is not None and not (self.opening and content):  # the message goes on
            self.current.lines.append(line)
        elif self.current is not None:
            self._wrapped_error(self.current, line, content, header is not None, title)
        elif header:  # outside any message: a new exception (or the one a log line logs)
            self.chain = self.chain if self.logged else next(self._chains)
            self.current = self._start(content, self.chain, False)
        elif title or (self.fresh and content):  # outside any message: a dbt error or a bare message
            self.chain = next(self._chains)
            self.current, self.opening = self._message(self.chain, False, [] if title else [line]), title
        self.fresh, self.logged, self.previous = self.fresh and not content, False, content

    def _log_line(self, level: str) -> None:
        """A log4j line starts a chain of its own; below ERROR, its exception is dropped."""
        self.chain = next(self._chains)
        if level in _QUIET_LEVELS:
            self.quiet_chains.add(self.chain)
        self.current, self.opening, self.fresh, self.logged, self.previous = None, False, False, True, ""

    def _cause(self, line: str, cause: re.Match[str]) -> None:
        """`Caused by: ` / `Suppressed: `: a record of the same chain when an exception follows."""
        has_header = _HEADER.match(line, cause.end()) is not None
        self.current = self._start(line[cause.end() :], self.chain, cause["via"] == "Caused by") if has_header \
            else None
        self.opening = False

    def _wrapped_error(self, current: _Draft, line: str, content: str, header: bool, title: bool) -> None:
        """The first line of the error a dbt error wraps (dbt errors nest: `Runtime Error in model
        x` / `Runtime Error` / ...)."""
        self.opening = title
        if header:
            self.current = self._start(content, current.chain, True)
        elif title:
            self.current = self._message(current.chain, True, [])
        else:
            current.lines.append(line)

    def _start(self, line: str, in_chain: int, is_cause: bool) -> _Draft:
        """Records for the header(s) that start `line`; the innermost one gets the message."""
        while header := _HEADER.match(line):
            self.drafts.append(_Draft(in_chain, header["paren"] or header["plain"], is_cause))
            line, is_cause = line[header.end() :], True
        self.drafts[-1].lines.append(line)
        return self.drafts[-1]

    def _message(self, in_chain: int, is_cause: bool, lines: list[str]) -> _Draft:
        self.drafts.append(_Draft(in_chain, None, is_cause, lines=lines))
        return self.drafts[-1]


# Iceberg's rewrite actions log a file group that failed to rewrite (before any commit) at ERROR.
_REWRITE_GROUP_FAILURE = re.compile(r"[ \t]*[\w$.]+: Failure during rewrite group ")


def logged_rewrite_group_failure(text: str) -> list[Record] | None:
    """The exception records a log4j ERROR line logs with a compaction's file group that failed
    to rewrite (empty when it logged none), or None when the text has no such line."""
    lines = _ANSI_ESCAPE.sub("", text).splitlines()
    for index, line in enumerate(lines):
        log = _LOG4J_LINE.match(line)
        if log and log["level"] in {"ERROR", "FATAL"} and _REWRITE_GROUP_FAILURE.match(line, log.end()):
            return records_of("\n".join(_logged_trace(lines[index + 1 :])))
    return None


def _logged_trace(lines: list[str]) -> list[str]:
    """The exception a log line logs: its lines up to the end of its stack trace."""
    trace: list[str] = []
    in_frames = False
    for line in lines:
        if _LOG4J_LINE.match(line):
            break
        is_frame = _FRAME.match(line) is not None
        if in_frames and not is_frame and not _CAUSE.match(line) and not line[:1].isspace():
            break  # Java's trace ended: what follows is not this exception's
        in_frames = in_frames or is_frame
        trace.append(line)
    return trace


def _freeze(drafts: list[_Draft], quiet_chains: set[int]) -> list[Record]:
    """The records of `drafts`, without the chains logged below ERROR."""
    records: list[Record] = []
    chains_with_cause: set[int] = set()  # chains with a cause after the draft at hand
    for draft in reversed(drafts):
        if draft.chain not in quiet_chains:
            message = _strip_message("\n".join(draft.lines))
            records.append(Record(draft.class_name, message, draft.chain in chains_with_cause))
        if draft.is_cause:
            chains_with_cause.add(draft.chain)
    return records[::-1]


def _strip_message(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines()]
    return "\n".join(line for line in lines if line)

