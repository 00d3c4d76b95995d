"""A Spark Thrift Server's error as its clients print it → the Java text `records` reads.

- PyHive raises `OperationalError(TExecuteStatementResp(status=TStatus(statusCode=3,
  infoMessages=['*<class>:<message>:<n>:<m>', '<class>:<method>:<file>:<line>', ...], ...,
  errorMessage='...')))`: Hive's `HiveSQLException.toString(Throwable)` packs each exception of the
  chain as `*class:message:frames-in-common:frames` (the first is the outermost) followed by its
  frames. It becomes `class: message`, `Caused by: class: message` and `\tat class.method(file:line)`
  lines, as Java prints a chain.
- beeline (JDBC) prints `Error: <exception> (state=...,code=...)`, after its prompt
  (`0: jdbc:hive2://host:port/db> `) in batch mode: prompt, `Error: ` and the state are dropped.
- dbt-spark raises the response's `errorMessage` (`Error running query: <class>: <message>`),
  which `records` reads as it is.
"""

from __future__ import annotations

import ast
import re

_CLASS = r"(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error)"
_INFO_MESSAGES = re.compile(r"(?:TExecuteStatementResp\(status=)?TStatus\([^\[\n]*?infoMessages=\[")
_LITERAL = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_SEPARATOR = re.compile(r"[\s,]*")
# `*class:message:n:m` (an exception) and `class:method:file:line` (a frame; file may be `Unknown Source`).
_PACKED_EXCEPTION = re.compile(r"\*(?P<cls>[^:\s]+):(?P<message>.*?)(?::\d+:\d+)?", re.DOTALL)
_PACKED_FRAME = re.compile(r"(?P<cls>[^:\s]+):(?P<method>[^:\s]+):(?P<file>[^:]*):(?P<line>-?\d+)")
BEELINE_PROMPT = r"\d+: jdbc:\S*?> "  # batch mode's prompt, before its output on the same line
_BEELINE_ERROR = re.compile(rf"^(?:{BEELINE_PROMPT})?Error: (?={_CLASS}:)", re.MULTILINE)
_BEELINE_STATE = re.compile(r" \(state=[^,()\n]*,code=-?\d+\)$", re.MULTILINE)


def unpack_client_forms(text: str) -> str:
    """`text` with PyHive's packed status and beeline's decorations turned into Java's own text."""
    while found := _INFO_MESSAGES.search(text):
        entries, end = _string_list(text, found.end())
        text = text[: found.start()] + "\n" + _java_text(entries) + "\n" + text[end:]
    text = _BEELINE_ERROR.sub("", text)
    return _BEELINE_STATE.sub("", text)


def _string_list(text: str, position: int) -> tuple[list[str], int]:
    """The Python string literals of a list whose items start at `position`, and where it ends.

    A list cut short (a truncated log) ends where the text or the last complete literal ends.
    """
    entries: list[str] = []
    while True:
        separator = _SEPARATOR.match(text, position)
        position = separator.end() if separator else position
        if position >= len(text) or text[position] == "]":
            return entries, min(position + 1, len(text))
        literal = _LITERAL.match(text, position)
        if literal is None:  # cut inside a literal: its readable part is the last entry
            if text[position] in "'\"":
                entries.append(_unescape(text[position + 1 :]))
                return entries, len(text)
            return entries, position
        entries.append(str(ast.literal_eval(literal.group())))
        position = literal.end()


def _java_text(entries: list[str]) -> str:
    """The entries of `infoMessages` as Java prints the exception chain."""
    lines: list[str] = []
    for entry in entries:
        exception = _PACKED_EXCEPTION.fullmatch(entry) if entry.startswith("*") else None
        frame = None if exception else _PACKED_FRAME.fullmatch(entry)
        if exception:
            via = "Caused by: " if lines else ""
            lines.append(f"{via}{exception['cls']}: {exception['message']}")
        elif frame:
            lines.append(f"\tat {frame['cls']}.{frame['method']}({frame['file']}:{frame['line']})")
        else:
            lines.append(entry)
    return "\n".join(lines)


def _unescape(cut: str) -> str:
    """A Python string literal's body cut short, unescaped (ast cannot read it unterminated)."""
    escapes = {"n": "\n", "t": "\t", "'": "'", '"': '"', "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(0)), cut.rstrip("\\"))
