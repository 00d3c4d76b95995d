"""The CLI's output layer: one console, one error-and-exit path, one table/JSON renderer.

Every `dbt-iceberg-maint` command prints through here, so all of them behave alike:
- `--output text|json` (`output_option`; `output_option_with_html` adds html where a command has an
  HTML report): text is a rich table on stdout; json is the same rows as a JSON list (or a
  command's own JSON report) on stdout and nothing else, so it can be piped.
- With `--output json` stdout holds the one JSON document and nothing else: while the command
  works, everything else that writes to stdout (dbt's log lines, a JVM it starts) writes to
  stderr (`document_stdout`, applied by `output_option`), and the document goes to the real
  stdout (`echo_document`).
- Errors go to stderr as `error: <message>` and exit 2 for usage errors (`UsageError`, bad
  arguments), 1 for any other failure of the product (`IcebergMaintError`) and for results that
  contain failures (`EXIT_FAILURES`); `handle_errors` maps exceptions to those codes.

A new command: decorate it with `@output_option` and `@handle_errors`, build its rows as dicts and
call `render(output, rows, columns, title=...)`; for a report that has its own JSON form use
`render_report`; preformatted text goes through `print_text`. Nothing else prints.
"""

from __future__ import annotations

import functools
import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NoReturn, ParamSpec, TypeVar

import click
from rich.console import Console

from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.text_tables import Column, table

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
# Tables wider than a pipe's default 80 columns: logs and CI keep whole rows.
NON_TTY_WIDTH = 160
OUTPUT_FORMATS = ("text", "json")

P = ParamSpec("P")
R = TypeVar("R")


def console(*, stderr: bool = False) -> Console:
    """The one console setup: the terminal's width on a TTY, NON_TTY_WIDTH otherwise."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else NON_TTY_WIDTH)


def fail(message: str, code: int = EXIT_FAILURES) -> NoReturn:
    """Print `error: <message>` to stderr and exit with `code` (2 usage, 1 failures)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def handle_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Run `command`; a UsageError exits 2, any other IcebergMaintError exits 1, both via `fail`."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except UsageError as exc:
            fail(str(exc), EXIT_USAGE)
        except IcebergMaintError as exc:
            fail(str(exc), EXIT_FAILURES)

    return wrapper


# Where `echo_document` writes while a `--output json` command runs (None: sys.stdout).
_document: list[IO[str]] = []


@contextmanager
def document_stdout() -> Iterator[None]:
    """Send whatever writes to stdout meanwhile to stderr, Python's writers (dbt's loggers, set up
    per invocation from sys.stdout) and, when stdout is a real file, the file descriptor too (a
    JVM or worker process started meanwhile inherits it); `echo_document` still reaches stdout."""
    real = sys.stdout
    real.flush()
    try:
        descriptor: int | None = real.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a file (click's CliRunner)
        descriptor = None
    saved = None
    if descriptor is not None:
        saved = os.dup(descriptor)
        sys.stderr.flush()
        os.dup2(sys.stderr.fileno(), descriptor)
    document: IO[str] = real if saved is None else io.TextIOWrapper(os.fdopen(os.dup(saved), "wb"))
    _document.append(document)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = real
        _document.pop()
        document.flush()
        if saved is not None:
            document.close()
            os.dup2(saved, descriptor)  # type: ignore[arg-type]
            os.close(saved)


def echo_document(text: str) -> None:
    """Print a command's machine-readable document (JSON) to stdout, the one thing there."""
    click.echo(text, file=_document[-1] if _document else None)


def _json_to_stdout_only(command: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs.get("output") != "json":
            return command(*args, **kwargs)
        with document_stdout():
            return command(*args, **kwargs)

    return wrapper


def output_option(command: Callable[P, R]) -> Callable[P, R]:
    """`--output text|json`, passed to the command as `output`; text is a table."""
    return output_option_for("a table")(command)


def output_option_for(text: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """`--output text|json` for a command whose text output is `text` (its --help says what it
    prints, not a table it does not); json: stdout holds the document only."""
    option = click.option("--output", type=click.Choice(OUTPUT_FORMATS), default="text", show_default=True,
                          help=f"text: {text}; json: machine-readable, nothing else on stdout.")
    return lambda command: option(_json_to_stdout_only(command))


def output_option_with_html(command: Callable[P, R]) -> Callable[P, R]:
    """`--output text|json|html`: html writes the command's HTML report to its `--report FILE`."""
    option = click.option("--output", type=click.Choice((*OUTPUT_FORMATS, "html")), default="text",
                          show_default=True, help="text: a table; json: machine-readable, nothing else on "
                                                  "stdout; html: the report written to --report FILE.")
    return option(_json_to_stdout_only(command))


def print_text(text: str) -> None:
    """Preformatted text as it is: no markup, no highlighting, no wrapping (shell lines stay whole)."""
    console().print(text, markup=False, highlight=False, soft_wrap=True)


def render(
    output: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[Column],
    *,
    title: str | None = None,
    empty: str = "nothing to show",
    footer: str | None = None,
) -> None:
    """Print `rows`: a JSON list for `--output json`, else a table (or `empty`) and a footer line."""
    if output == "json":
        echo_document(json.dumps([dict(row) for row in rows], indent=2, default=str))
        return
    out = console()
    if rows:
        out.print(table(rows, columns, title=title))
    else:
        out.print(empty)
    if footer:
        out.print(footer)


def render_report(output: str, report_json: str, text: Callable[[Console], None] | str,
                  report_path: Path | None = None) -> None:
    """A report with its own JSON form: `--report FILE` gets the JSON whatever `--output` says;
    `--output json` prints it; text output calls `text(console)`, or prints `text` as it is."""
    if report_path is not None:
        report_path.write_text(report_json + "\n")
    if output == "json":
        echo_document(report_json)
    elif isinstance(text, str):
        print_text(text)
    else:
        text(console())
