"""The torture suite's pure judgements: how a fuzz outcome, a runner report node and a cut's
aftermath are read (lab/fuzz.py, lab/torture_workers.py, lab/torture.py)."""

from __future__ import annotations

import time
from pathlib import Path

from dbt_iceberg_maint.runtime.spark import log4j2_java_options
from lab.fuzz import call_is_intact, judge, names_an_argument, operation_error, properties_sql_is_intact
from lab.ledger import TableCheck
from lab.torture_judging import (
    FaultScope,
    cut_tables,
    describe_outcome,
    fault_outcome,
    fault_scope,
    fault_survived,
    jvm_exceptions,
    last_operation,
    operation_counts,
)
from lab.torture_workers import failure_text, ledger_event, spark_conf

ROOT = Path(__file__).resolve().parents[2]
CASE = {"kind": "procedure", "procedure": "rewrite_data_files", "kwargs": {"where": "x"}}


def test_a_call_with_its_values_inside_literals_is_intact() -> None:
    assert call_is_intact("CALL local.system.rewrite_data_files(table => 'fuzz.target', "
                          "options => map('min-input-files', '2'), where => 'id > 0\\') or (\\'1\\'=\\'1')")
    assert call_is_intact("CALL system.expire_snapshots(table => 's.t', older_than => TIMESTAMP '2024-01-01 "
                          "00:00:00Z', retain_last => 5, snapshot_ids => array(1, 2), stream_results => true)")


def test_a_call_whose_structure_changed_is_not() -> None:
    assert not call_is_intact("CALL system.rewrite_data_files(table => 's.t', where => 'a'); drop table x")
    assert not call_is_intact("CALL system.rewrite_data_files(table => 's.t', where => 'a' or 1=1)")
    assert not call_is_intact("CALL system.rewrite_data_files(table => 's.t') -- ')")
    assert not call_is_intact("select 1")


def test_properties_sql_keeps_keys_and_values_in_literals() -> None:
    assert properties_sql_is_intact("alter table local.fuzz.target set tblproperties ('k' = 'v\\'); --')")
    assert not properties_sql_is_intact("alter table local.fuzz.target set tblproperties ('k' = 'v'); drop table x")


def test_a_refusal_must_name_an_argument_the_case_set() -> None:
    assert names_an_argument(["rewrite_data_files: argument `where` is ..."], CASE)
    assert not names_an_argument(["something went wrong"], CASE)
    policy = {"kind": "policy", "policy": {"commit_retry": {"num_retries": -1}}}
    assert names_an_argument(["commit_retry.num_retries is -1; ..."], policy)
    assert not names_an_argument(["num_retriesx is bad"], policy)



def test_judge() -> None:
    assert judge(CASE, {"errors": ["argument `where` is bad"]}) == "refused"
    assert judge(CASE, {"errors": [], "sql": "CALL system.rewrite_data_files(table => 'a.b', where => 'x')",
                        "status": "dry_run"}) == "accepted"
    assert judge(CASE, {"errors": [], "sql": "CALL system.rewrite_data_files(table => 'a.b') or 1=1",
                        "status": "dry_run"}).startswith("DEFECT: not a procedure call")
    assert judge(CASE, {"errors": ["boom"]}).startswith("refused without naming the argument")
    assert judge(CASE, {"errors": [], "sql": None, "status": "success"}).startswith("accepted but its dry run")


def test_operation_error_is_the_logged_compiler_error() -> None:
    assert operation_error(["x", "Encountered an error while running operation: bad `where`"]) == (
        "Encountered an error while running operation: bad `where`")
    assert operation_error(["x"]) is None


def test_a_runner_report_node_becomes_a_ledger_event() -> None:
    assert ledger_event(None) == "unknown"
    assert ledger_event({"final_status": "success"}) == "committed"
    assert ledger_event({"final_status": "error", "write_landed": True}) == "committed"
    assert ledger_event({"final_status": "error", "write_landed": False}) == "failed"
    assert ledger_event({"final_status": "error", "write_landed": None}) == "unknown"


def test_a_cut_is_judged_by_the_workers_first_event_after_it() -> None:
    fault = {"worker": "w", "cut_at": 10.0}
    events = [{"worker": "w", "at": 5.0, "kind": "batch", "outcomes": {}},
              {"worker": "other", "at": 11.0, "kind": "batch", "outcomes": {}},
              {"worker": "w", "at": 12.0, "kind": "batch", "batch": 3, "outcomes": {
                  "t": {"event": "committed", "attempts": 2, "kinds": ["commit_state_unknown", None],
                        "write_landed": False, "messages": ["CommitStateUnknownException: ..."]}}}]
    outcome = fault_outcome(fault, events)
    assert outcome["batch"] == 3 and outcome["exceptions"] == ["CommitStateUnknownException"]
    assert describe_outcome(outcome) == ("batch committed after 2 attempt(s); failure kinds commit_state_unknown; "
                                         "raised CommitStateUnknownException; landed verification: [False]")
    quiet = fault_outcome(fault, [{"worker": "w", "at": 12.0, "kind": "batch", "batch": 4, "outcomes": {
        "t": {"event": "committed", "attempts": 1, "kinds": [None]}}}])
    assert describe_outcome(quiet) == "batch committed after 1 attempt(s), no error reached the writer"
    assert fault_outcome(fault, [])["observed"].startswith("no event after the cut")


def test_jvm_exceptions_are_read_from_the_log_window() -> None:
    log = ("26/11/23 19:48:28 WARN Tasks: Retrying task after failure: sleepTimeMs=50 Failed to update table\n"
           "org.apache.iceberg.exceptions.CommitFailedException: Failed to update table torture.t_merge\n"
           "\tat org.apache.iceberg.util.Tasks$Builder.runTaskWithRetry(Tasks.java:413)\n"
           "26/11/23 19:58:00 WARN X: later\n"
           "org.apache.iceberg.exceptions.CommitStateUnknownException: unknown\n")
    at = time.mktime(time.strptime("26/11/23 19:48:28", "%y/%m/%d %H:%M:%S"))
    assert jvm_exceptions(log, at - 5, at + 5) == {"CommitFailedException": 1}
    assert jvm_exceptions(log, at, at + 3600) == {"CommitFailedException": 1, "CommitStateUnknownException": 1}
    # The Hive Metastore client's lost connection (a cut on the metastore's Thrift port).
    hms = ("26/11/28 12:15:43 ERROR HiveTableOperations: Cannot tell if commit to torture.t_append succeeded, "
           "attempting to reconnect and check.\norg.apache.thrift.transport.TTransportException\n")
    hms_at = time.mktime(time.strptime("26/11/28 12:15:43", "%y/%m/%d %H:%M:%S"))
    assert jvm_exceptions(hms, hms_at, hms_at) == {"TTransportException": 1}


def _batch(worker: str, at: float, event: str) -> dict[str, object]:
    return {"worker": worker, "at": at, "kind": "batch", "outcomes": {"t": {"event": event}}}


def _checks(**problems: dict[str, tuple[int, ...]]) -> dict[str, TableCheck]:
    """A ledger check per table: clean, or with the given problem lists (batch ids)."""
    return {t: TableCheck(t, 10, 10, **problems.get(t, {}), details=tuple(f"{k} {v}" for k, v in
                                                                     problems.get(t, {}).items()))
            for t in ("t_merge", "t_overwrite", "t_append")}


def test_a_writer_fault_is_judged_on_its_own_batch() -> None:
    """The last full run left `survived` at 0 for every kind: it was the whole run's verdict. A
    fault now rests on its own evidence: a writer's kill or cut on the batch it hit."""
    kill = {"kind": "kill_writer_mid_merge", "at": 10.0, "batch": 7}
    scope = fault_scope(kill, "dbt_w", ["t_merge", "t_append"])
    assert scope == FaultScope(("t_merge", "t_append"), 7, "the batch the writer was killed in")
    later = [_batch("dbt_w", 20.0, "committed")]
    # Another batch lost on the same table is some other fault's evidence, not this one's.
    assert fault_survived(kill, scope, _checks(t_merge={"lost": (3,)}), {}, later, "dbt_w") == (
        True, "batch 7 as the ledger says in t_merge, t_append (the batch the writer was killed in); dbt_w "
              "committed a batch after it")
    assert fault_survived(kill, scope, _checks(t_append={"duplicated": (7,)}), {}, later, "dbt_w") == (
        False, "t_append: batch 7 duplicated")
    assert fault_survived(kill, scope, _checks(), {"t_merge": 2}, later, "dbt_w") == (
        False, "t_merge: 2 referenced file(s) missing")
    assert fault_survived(kill, scope, _checks(), {}, [_batch("dbt_w", 9.0, "committed")], "dbt_w") == (
        False, "dbt_w committed no batch after it")

    cut = {"kind": "catalog_cut_after_commit", "worker": "w", "cut_at": 10.0, "at": 5.0, "tables_cut": ["t_append"],
           "outcome": {"observed": "batch", "batch": 12, "events": {"t_merge": "committed", "t_append": "committed"}}}
    scope = fault_scope(cut, "w", ["t_merge", "t_append"])
    assert (scope.tables, scope.batch) == (("t_append",), 12)
    events = [_batch("w", 12.0, "failed"), _batch("w", 15.0, "committed")]
    assert fault_survived(cut, scope, _checks(t_merge={"lost": (12,)}), {}, events, "w")[0]
    assert fault_survived(cut, scope, _checks(t_append={"unexpected": (12,)}), {}, events, "w") == (
        False, "t_append: batch 12 unexpected")
    silent = {**cut, "tables_cut": [], "outcome": {"observed": "no event after the cut (run ended)"}}
    scope = fault_scope(silent, "w", ["t_merge"])
    assert scope.batch is None and not fault_survived(silent, scope, _checks(), {}, events, "w")[0]


def test_a_maintenance_fault_is_judged_on_the_table_it_hit() -> None:
    done = {"worker": "maintenance", "at": 20.0, "kind": "maintenance", "exit_code": 0}
    cut = {"kind": "catalog_cut_before_commit", "worker": "maintenance", "cut_at": 10.0, "at": 9.0,
           "tables_cut": ["t_overwrite"]}
    scope = fault_scope(cut, "maintenance", ["t_merge", "t_overwrite", "t_append"])
    assert scope == FaultScope(("t_overwrite",), None, "the cut statement's table")
    assert fault_survived(cut, scope, _checks(t_merge={"lost": (1,)}), {}, [done], "maintenance") == (
        True, "t_overwrite (the cut statement's table) intact; a maintenance invocation completed after it")
    assert not fault_survived(cut, scope, _checks(t_overwrite={"lost": (1,)}), {}, [done], "maintenance")[0]
    assert fault_survived(cut, scope, _checks(), {}, [{**done, "exit_code": 1}], "maintenance") == (
        False, "no maintenance invocation completed after it")

    kill = {"kind": "kill_maintenance_mid_rewrite", "at": 10.0, "table": "t_merge"}
    scope = fault_scope(kill, "maintenance", ["t_merge", "t_overwrite", "t_append"])
    assert scope.tables == ("t_merge",)
    assert fault_survived(kill, scope, _checks(), {}, [done], "maintenance", {"t_append": 4})[0]
    assert fault_survived(kill, scope, _checks(), {}, [done], "maintenance", {"t_merge": 4}) == (
        False, "t_merge: 4 aged orphan(s) left")
    unseen = fault_scope({"kind": "kill_maintenance_at_load_end", "at": 10.0}, "maintenance", ["t_merge", "t_append"])
    assert unseen.tables == ("t_merge", "t_append") and unseen.source.startswith("no step seen")
    assert not fault_survived(kill, unseen, _checks(t_append={"mismatched": (2,)}), {}, [done], "maintenance")[0]


def test_a_cut_names_its_table_and_a_log_its_last_step() -> None:
    statement = (b"P\x00\x00UPDATE iceberg_tables SET metadata_location = $1 WHERE table_name = $5\x00"
                 b"B\x00\x00\x00\x07torture\x00\x00\x00\x07t_merge\x00")
    assert cut_tables([statement]) == ["t_merge"]
    assert cut_tables([b"t_merged t_appendix"]) == [] and cut_tables([]) == []
    log = "12:00:00  1 of 4 torture.t_merge rewrite_data_files\n12:00:09  2 of 4 torture.t_append expire_snapshots\n"
    assert last_operation(log) == ("t_append", "expire_snapshots") and last_operation("") is None


def test_operation_counts_per_operation_and_status() -> None:
    events = [{"results": [{"operation": "rewrite_data_files", "status": "success"},
                           {"operation": "rewrite_data_files", "status": "skipped"}]},
              {"results": [{"operation": "rewrite_data_files", "status": "success"},
                           {"operation": "expire_snapshots", "status": "failed"}]}]
    assert operation_counts(events) == {"rewrite_data_files": {"success": 2, "skipped": 1},
                                        "expire_snapshots": {"failed": 1}}


def test_a_long_failure_keeps_the_exception_name_the_classifier_reads() -> None:
    """The full run's plain Spark writer kept only the last 3,000 characters of a Py4J error (the
    JVM stack's tail, without the exception's name) behind the Python class name, so its cuts were
    classified `not_iceberg_conflict` instead of `commit_state_unknown`."""
    from dbt_iceberg_maint.conflicts import classify

    head = ("An error occurred while calling o49.sql.\n: org.apache.iceberg.jdbc.UncheckedSQLException: "
            "Unknown failure\n")
    frame = "\tat org.apache.iceberg.jdbc.JdbcTableOperations.doCommit(JdbcTableOperations.java:145)\n"
    error = RuntimeError(head + frame * 80)
    text = failure_text(error)
    assert len(text) <= 3000 + len("\n[...]\n") and "UncheckedSQLException" in text
    assert classify(text).kind == "commit_state_unknown"
    assert failure_text(RuntimeError("short")) == "short"
    assert failure_text(RuntimeError()) == "RuntimeError\n"


def test_the_workers_jvms_log_in_the_machines_zone_with_the_runtimes_log_settings() -> None:
    conf = spark_conf({"TORTURE_WAREHOUSE": "/wh", "TORTURE_CATALOG_TYPE": "jdbc", "TORTURE_JARS": "/x.jar",
                       "TORTURE_CATALOG_URI": "jdbc:postgresql://127.0.0.1:5432/db"})
    assert conf["spark.driver.extraJavaOptions"] == log4j2_java_options()  # no -Duser.timezone=UTC
    assert conf["spark.master"] == "local[2]"


def test_a_cuts_exceptions_are_the_ones_its_failure_records_raise() -> None:
    """fault_outcome's `exceptions`: the classes of the exception records in the failure texts
    (conflicts.records, as the classifier reads them), not names found anywhere in the text."""
    fault = {"worker": "w", "cut_at": 10.0}

    def raised(outcome: dict[str, object]) -> list[str]:
        event = {"worker": "w", "at": 12.0, "kind": "batch", "batch": 5, "outcomes": {"t": outcome}}
        return list(fault_outcome(fault, [event])["exceptions"])

    thrift = ("Database Error in model t_merge (models/t_merge.sql)\n  org.apache.hive.service.cli.HiveSQLException: "
              "Error running query: org.apache.iceberg.exceptions.CommitFailedException: Commit failed\n")
    assert raised({"event": "failed", "messages": [thrift]}) == ["CommitFailedException"]
    py4j = ("An error occurred while calling o49.sql.\n"
            ": org.apache.iceberg.jdbc.UncheckedSQLException: Unknown failure\n"
            "\tat org.apache.iceberg.jdbc.JdbcTableOperations.doCommit(JdbcTableOperations.java:145)\n"
            "Caused by: org.postgresql.util.PSQLException: An I/O error occurred while sending to the backend.\n")
    assert raised({"event": "committed", "failures": [{"kind": "commit_state_unknown", "message": py4j}]}) == [
        "PSQLException", "UncheckedSQLException"]
    # A class counts under the name its simple name ends with, as the search of the names counted it.
    exists = ("org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException: [TABLE_OR_VIEW_ALREADY_EXISTS] "
              "Cannot create table `t`.")
    assert raised({"messages": [exists]}) == ["AlreadyExistsException"]
    # Quoted, not raised: a statement dbt echoes in its log names no exception of this failure.
    echo = (ROOT / "tests/unit/failures/not_a_conflict__dbt_log_sql_echo.txt").read_text()
    assert "CommitFailedException" in echo and raised({"event": "failed", "messages": [echo]}) == []
    maintenance = {"worker": "w", "at": 12.0, "kind": "maintenance", "exit_code": 1, "results": [
        {"table": "torture.t_merge", "operation": "rewrite_data_files", "status": "failed",
         "reason": "org.apache.iceberg.exceptions.ValidationException: Cannot commit, missing data files"},
        {"table": "torture.t_merge", "operation": "rewrite_manifests", "status": "failed",
         "reason": "stopped the run-operation at run time (commit_state_unknown): the catalog could not confirm"}]}
    assert fault_outcome(fault, [maintenance])["exceptions"] == ["ValidationException"]
