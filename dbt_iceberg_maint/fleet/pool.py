"""The fleet engine's pool: the steps' shared schedule and the loop each worker runs, taking the
next step (scheduler.py decides which), running it and settling its outcome, until nothing is
left to start or the budget closed; and the tables' leases, claimed in batches (claim_leases)
and handed from step to step (docs/leases.md), so that a step sends no lease statement of its own.
The steps' history rows go the same way: each step logs its row, the pool completes it with the
health after the step read from the table's metadata file, and the next batch claim (or the run's
end) writes the rows so far in one INSERT (docs/history.md)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.fleet import scheduler
from dbt_iceberg_maint.fleet.scheduler import Step, StepOutcome, TableWork
from dbt_iceberg_maint.fleet.steps import after_failure, step_args, step_outcome
from dbt_iceberg_maint.fleet.workers import Worker
from dbt_iceberg_maint.maintenance.leases import claim_args
from dbt_iceberg_maint.maintenance.results import (
    CHECK_KINDS,
    checked_facts,
    deferred_history_rows,
    history_problems,
    history_written,
    kept_leases,
)
from dbt_iceberg_maint.maintenance.run import error_text, marker_messages
from dbt_iceberg_maint.protocol import HISTORY_MARKER, KEPT_MARKER, marker_payloads
from dbt_iceberg_maint.runtime.invoke import DbtInvocation

# What the progress callback receives after every change: counts and the ETA in seconds.
Progress = Callable[[Mapping[str, Any]], None]
# Tables whose leases one claim_leases invocation takes: the table whose step a worker takes and
# the next ones in the schedule's order that no step runs on. A larger batch holds tables longer
# before their steps; every one is given back at the run's end if its step never started.
CLAIM_BATCH = 8


class Schedule:
    """The scheduling loop's shared state (guarded by one condition variable)."""

    def __init__(self, tables: Sequence[TableWork], concurrency: int, budget_s: float | None,
                 timeout_s: float | None, started: float, progress: Progress | None) -> None:
        self.order = [t.table for t in tables]
        self.queues = {t.table: list(t.due) for t in tables}
        self.concurrency, self.budget_s, self.timeout_s, self.started = concurrency, budget_s, timeout_s, started
        self.busy: set[str] = set()
        self.outcomes: list[StepOutcome] = []
        self.durations: list[float] = []
        self.cond = threading.Condition()
        self.progress = progress
        self.total = sum(len(q) for q in self.queues.values())

    def take(self, reserve: Callable[[str], list[str] | None] | None = None
             ) -> tuple[Step, list[str] | None] | None:
        """The next step for a free worker; None when nothing is left to start (or the budget closed).
        `reserve` (called with the step's table, under the lock): other tables to hold as busy along
        with it until the worker releases them (Pool.lease_for), or None."""
        with self.cond:
            while True:
                if not scheduler.may_start(time.monotonic() - self.started, self.budget_s):
                    return None
                step = scheduler.next_step(self.queues, self.order, self.busy)
                if step is not None:
                    self.queues[step.table].pop(0)
                    self.busy.add(step.table)
                    reserved = reserve(step.table) if reserve is not None else None
                    self.busy.update(reserved or ())
                    self._report()
                    return step, reserved
                if not any(self.queues.values()):
                    return None
                self.cond.wait(timeout=0.5)

    def has_more(self, table: str) -> bool:
        """Whether `table` has steps left to start."""
        with self.cond:
            return bool(self.queues.get(table))

    def settle(self, step: Step, outcome: StepOutcome) -> None:
        with self.cond:
            self.outcomes.append(outcome)
            if outcome.duration_s is not None:
                self.durations.append(outcome.duration_s)
            if outcome.kind == "timeout":  # it may still run in Spark: nothing else on that table
                for later in self.queues.pop(step.table, []):
                    self.outcomes.append(StepOutcome(later.table, later.operation, "skipped", sql=later.sql,
                                                     reason=f"not started: {step.operation} on this table timed out "
                                                            "and may still be running in Spark",
                                                     eligible_files=later.eligible_files,
                                                     eligible_bytes=later.eligible_bytes))
            self.busy.discard(step.table)
            self._report()
            self.cond.notify_all()

    def _report(self) -> None:
        if self.progress is None:
            return
        left = sum(len(q) for q in self.queues.values())
        done = len(self.durations)
        self.progress({"total": self.total, "done": done, "running": len(self.busy), "left": left,
                       "elapsed_s": round(time.monotonic() - self.started, 1),
                       "eta_s": scheduler.eta_s(self.durations, left, len(self.busy), self.concurrency)})


class Pool:
    """The run's workers and what they did: the invocations and statements they ran, the first
    error that stopped one of them, whether an invocation of the run found the history table ready."""

    def __init__(self, workers: Sequence[Worker], schedule: Schedule, records: Mapping[str, Any], run_id: str,
                 dbt_args: Sequence[str], timeout_s: float | None, prepare: Sequence[str] | None,
                 health: Callable[[str], Mapping[str, Any] | None] | None = None) -> None:
        self.workers, self.schedule, self.records, self.run_id = list(workers), schedule, records, run_id
        self.dbt_args, self.timeout_s, self.prepare, self.health = list(dbt_args), timeout_s, prepare, health
        self.invocations = 0
        self.statements = 0
        self.errors: list[BaseException] = []
        # Once an invocation of this run wrote history (or created its table), the others skip its
        # three check statements (docs/history.md).
        self.history_ready = False
        # What invocations of this run checked once (lease logs that exist, catalogs that are not
        # Nessie's): the later steps do not check it again.
        self.checked: dict[str, set[str]] = {kind: set() for kind in CHECK_KINDS}
        # Each table's lease, held ahead of and between its steps: claimed in a batch with other
        # tables' (claim_leases), or kept by the step that ran last on it; its next step takes it up.
        self.kept: dict[str, Mapping[str, Any]] = {}
        # Leases kept after their tables' last steps: released in one commit by the next batch's
        # claim, or at the run's end.
        self.finished: dict[str, Mapping[str, Any]] = {}
        # Off once a batch claim took no lease (leases disabled, or it failed): each step then
        # claims its table's lease itself, hands it over while the table has steps left, and
        # writes its own history row.
        self.batching = True
        # The history rows the steps deferred while batching: written by the next batch claim, or
        # at the run's end (give_back_kept). A killed engine loses them, as it leaves its leases.
        self.unwritten: list[Mapping[str, Any]] = []
        # Why rows the pool wrote were not written (the history's checks, or the INSERT's failure).
        self.history_problems: list[str] = []
        # Each table's health after its last step this run: the health before its next one.
        self.healths: dict[str, Mapping[str, Any]] = {}
        # Steps start once every worker is ready (dbt imported): a worker that is ready first would
        # otherwise take a short queue alone while the others still start.
        self.ready = threading.Barrier(len(self.workers))

    def note_checks(self, invocation: DbtInvocation | None) -> None:
        """What `invocation` found ready: the history table, lease logs, catalogs."""
        if invocation is None:
            return
        messages = marker_messages(invocation)
        with self.schedule.cond:
            if not self.history_ready and history_written(messages):
                self.history_ready = True
            for kind, names in checked_facts(messages).items():
                self.checked[kind] |= names

    def known_checks(self) -> dict[str, frozenset[str]]:
        with self.schedule.cond:
            return {kind: frozenset(names) for kind, names in self.checked.items()}

    def batch(self, table: str) -> list[str] | None:
        """Called as a step of `table` is taken (under the schedule's lock): None when its lease is
        kept (or batches are off), else the other tables to claim with it, the next ones in the
        schedule's order that no step runs on and whose leases are not kept. They stay reserved
        (busy) until the claim ended, so that no other worker claims them too: a second claim of the
        run would take over the first, whose release would then end nothing."""
        state = self.schedule
        if table in self.kept or not self.batching:
            return None
        return [t for t in state.order if t != table and state.queues.get(t) and t not in state.busy
                and t not in self.kept][:CLAIM_BATCH - 1]

    def lease_for(self, worker: Worker, table: str, others: list[str] | None) -> Mapping[str, Any] | None:
        """The lease `table`'s step takes up: kept for it, or claimed now with `others` (Pool.batch),
        releasing the finished tables' leases in the same invocation; None: the step claims for
        itself."""
        state = self.schedule
        with state.cond:
            lease = self.kept.pop(table, None)
            if others is None:
                return lease
            release = list(self.finished.values())
            self.finished.clear()
            rows, self.unwritten = self.unwritten, []
            history_checked = self.history_ready
        claimed: dict[str, dict[str, Any]] = {}
        invocation = None
        settled = False
        try:
            invocation = worker.run([*claim_args([table, *others], release, self.known_checks(), rows,
                                                 history_checked), *self.dbt_args], self.timeout_s).invocation
            self.note_checks(invocation)
            messages = marker_messages(invocation) if invocation else ()
            # Its KEPT line follows the release and the claim: they hold even if the history's INSERT,
            # which comes last, failed.
            settled = invocation is not None and (invocation.success
                                                  or any(True for _ in marker_payloads(messages, KEPT_MARKER)))
            claimed = kept_leases(messages) if settled else {}
        finally:
            # The claimed leases are kept before the reserved tables are free again.
            with state.cond:
                self.invocations += 1
                self.statements += len(invocation.sql_statements) if invocation else 0
                self._note_rows_written(rows, invocation)
                if not settled:
                    self.finished.update({lease["table"]: lease for lease in release})  # given back at the end
                if not claimed:
                    self.batching = False
                for other in others:
                    if other in claimed:
                        self.kept.setdefault(other, claimed[other])
                state.busy.difference_update(others)
                state.cond.notify_all()
        return claimed.get(table)

    def _note_rows_written(self, rows: list[Mapping[str, Any]], invocation: DbtInvocation | None) -> None:
        """After an invocation that was to write `rows` (under the lock): rows whose INSERT was not
        sent (the invocation stopped before it) wait for the next one; the history's own problems
        are reported."""
        if not rows:
            return
        messages = marker_messages(invocation) if invocation else ()
        self.history_problems.extend(p for p in history_problems(messages) if p not in self.history_problems)
        if not any(True for _ in marker_payloads(messages, HISTORY_MARKER)):
            self.unwritten[:0] = rows

    def _completed(self, table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows a step deferred, an executed step's with the health after it (read now, while
        the step's lease is still held) and before it (after the table's previous step)."""
        done = []
        for row in rows:
            if row.get("status") == "success" and row.get("sql") and row.get("health_after") is None and self.health:
                after = self.health(table)
                before = self.healths.get(table)
                if before is not None and row.get("health_before") is None:
                    row = {**row, "health_before": json.dumps(before, sort_keys=True),
                           "snapshot_id_before": before.get("snapshot_id")}
                if after is not None:
                    row = {**row, "health_after": json.dumps(after, sort_keys=True),
                           "snapshot_id_after": after.get("snapshot_id")}
                    self.healths[table] = after
            done.append(row)
        return done

    def keep(self, table: str, lease: Mapping[str, Any]) -> None:
        """A lease a step kept: for the table's next step, else released with the next batch."""
        with self.schedule.cond:
            (self.kept if self.schedule.queues.get(table) else self.finished)[table] = lease

    def give_back_kept(self) -> None:
        """Release every lease still kept: those of finished tables and of steps that never started
        (the budget closed, or the run stopped), so other jobs need not wait for their TTL, and
        write the history rows still deferred. Best effort: a lease not given back expires after
        its TTL, as a killed run's does; rows not written are reported (history_problems)."""
        leases = [*self.kept.values(), *self.finished.values()]
        rows, self.unwritten = self.unwritten, []
        self.kept.clear()
        self.finished.clear()
        if not leases and not rows:
            return
        released = None
        try:
            released = self.workers[0].run([*claim_args([], leases, history_rows=rows,
                                                        history_checked=self.history_ready), *self.dbt_args],
                                           None).invocation
        except Exception as exc:  # the run's own error, if any, is the one to raise
            if rows:
                self.history_problems.append(f"{len(rows)} history row(s) of this run's steps were not written: {exc}")
            return
        self.invocations += 1
        self.statements += len(released.sql_statements) if released else 0
        self._note_rows_written(rows, released)
        if self.unwritten:
            self.history_problems.append(
                f"{len(self.unwritten)} history row(s) of this run's steps were not written: "
                f"{error_text(released) if released else 'its worker stopped'}")
            self.unwritten = []

    def run(self) -> None:
        """Every worker takes steps until none is left to start: the one in-process worker on this
        thread, subprocess workers each on a thread of its own. A worker's error is raised here."""
        if len(self.workers) == 1 and self.workers[0].mode == "in_process":
            self.work(self.workers[0])
        else:
            threads = [threading.Thread(target=self.work, args=(w,), name=f"fleet-worker-{w.index}")
                       for w in self.workers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if self.errors:
            raise IcebergMaintError(f"the fleet engine stopped: {self.errors[0]}") from self.errors[0]

    def work(self, worker: Worker) -> None:
        state, timeout = self.schedule, self.timeout_s
        try:
            worker.start()
            if self.prepare is not None and worker.index == 1:  # a failure here leaves it to the steps
                prepared = worker.run([*self.prepare, *self.dbt_args], None).invocation
                self.note_checks(prepared)
                with state.cond:
                    self.invocations += 1
                    self.statements += len(prepared.sql_statements) if prepared else 0
            self.ready.wait()
            while (taken := state.take(self.batch)) is not None:
                step, others = taken
                started = time.time()
                record = self.records.get(step.table)
                lease = self.lease_for(worker, step.table, others)
                # Kept for the table's next step; with batches, after its last too (released with the next),
                # and its history row is written with the next batch too.
                defer = self.batching
                keep = defer or state.has_more(step.table)
                ran = worker.run(step_args(step, record, self.dbt_args, self.history_ready, self.known_checks(),
                                           lease, keep, defer), timeout)
                self.note_checks(ran.invocation)
                if defer and ran.invocation is not None:
                    rows = self._completed(step.table, deferred_history_rows(marker_messages(ran.invocation)))
                    with state.cond:
                        self.unwritten.extend(rows)
                outcome = step_outcome(step, ran, started, time.time(), worker.index, timeout)
                outcome, extra = after_failure(worker, step, outcome, record, self.run_id, self.dbt_args, timeout)
                # A failed step's lease was given back (after_failure) or stays until its TTL.
                if keep and ran.invocation is not None and outcome.status != "failed":
                    if (kept := kept_leases(marker_messages(ran.invocation)).get(step.table)) is not None:
                        self.keep(step.table, kept)
                with state.cond:
                    self.invocations += 1 + extra
                    self.statements += outcome.statements
                state.settle(step, outcome)
        except BaseException as exc:  # re-raised on the main thread once every worker stopped
            if not isinstance(exc, threading.BrokenBarrierError):  # another worker's failure broke it
                self.errors.append(exc)
            self.ready.abort()
            with state.cond:
                state.queues.clear()
                state.cond.notify_all()
