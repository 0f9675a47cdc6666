"""``eventtime late reconcile``: the too-late records of the late-data table merged into the
results table as CORRECTION panes (the rules: :mod:`eventtime.core.reconcile`), exactly once.

* The pipeline (window, aggregations, keys) is read from the tables' properties, where
  ``route`` records it when the query starts (:func:`eventtime.sinks.tables.record_pipeline`).
* One run is one Delta commit to the results table: the CORRECTION panes, each with the ids of
  the late records it holds (``late_record_ids``), under the app transaction
  ``eventtime/results/<pipeline>/reconcile`` and the run's number as its version. A run killed
  before that commit wrote nothing; one after it is done. The records a run used are the ones
  the results table lists, so a second run finds nothing to do; a run that commits after
  another with the same number is skipped by Delta's transaction check and writes nothing.
* The late-data table is never rewritten: which records are reconciled is read from the
  results table (:func:`reconciled_ids`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import time
from typing import Any, Mapping, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..core.aggregations import pane_columns
from ..core.config import EngineConfig
from ..core.kinds import COUNT
from ..core.kinds import SUM as SUM_KIND
from ..core.reconcile import CORRECTION, WINDOW_OPEN, CurrentPane, LateInput, plan_corrections, windows_of
from ..core.timestamps import PARTLY_LATE, TOO_LATE
from ..core.trigger import FINAL, ON_TIME
from ..core.window import Window
from ..ops.faults import fault_point
from ..sinks.schema import MERGED_FROM_TYPE, TABLE_COLUMNS, TS
from ..sinks.tables import check_table_columns, recorded_pipelines
from .reconcile_payloads import late_values
from .reconcile_results import (LATE_RECORD_IDS, RECONCILE_QUERY, delta_dataset, delta_exists, one_run_at_a_time,
                                open_results)

__all__ = ["ReconcileReport", "reconcile", "reconciled_ids", "reconciliation", "RECONCILE_QUERY", "LATE_RECORD_IDS",
           "PAYLOAD_UNREADABLE", "NO_RECORD_ID"]

PAYLOAD_UNREADABLE = "payload_unreadable"  # the stored payload does not give the aggregations' values
NO_RECORD_ID = "no_record_id"  # a late table written before record ids (eventtime 0.x): not reconcilable


@dataclasses.dataclass
class ReconcileReport:
    """What a run did: too-late records read / reconciled now / reconciled before, CORRECTION panes written, records left (by
    reason, with their ids), how much the corrections move the totals of the counts and sums, and time."""

    pipeline: str
    run: Optional[int]
    written: bool
    late_records: int
    reconciled: int
    corrections: int
    windows_merged: int
    left: dict[str, list[str]]
    totals_change: dict[str, Any]
    watermark_ms: Optional[int]
    seconds: float
    already: int = 0  # records of the late table that earlier runs reconciled
    skipped: Optional[str] = None
    why: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # reason -> what it says, distinct

    @property
    def stuck(self) -> int:
        """Records left that a later run will not reconcile by itself (any reason but ``window_open``)."""
        return sum(len(ids) for reason, ids in self.left.items() if reason != WINDOW_OPEN)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_dataset, _exists = delta_dataset, delta_exists


def _refuse_late(late: str, options, spark) -> None:
    if not delta_exists(late, options):
        raise ValueError(f"reconcile: no Delta table at {late!r} (the late table that DeltaLateSink writes)")
    required, typed = TABLE_COLUMNS["late"]
    check_table_columns(late, "reconcile (late table)", "late and invalid records", required, typed, None, options, spark)


def _pipeline(late: str, results: Any, pipeline: Optional[str], options) -> tuple[str, dict]:
    docs_late, docs_results = recorded_pipelines(late, options), results.documents()
    names = sorted(set(docs_late) | set(docs_results))
    if pipeline is None:
        if len(names) != 1:
            raise ValueError(
                f"reconcile: the tables at {late!r} and {results.name} record "
                + (f"the pipelines {', '.join(names)}: pass --pipeline" if names else
                   "no pipeline (tables written before eventtime recorded its pipelines in them): run the streaming "
                   "query once with this version (route records its window, aggregations and keys in both tables "
                   "when it starts), then reconcile"))
        pipeline = names[0]
    doc_late, doc_results = docs_late.get(pipeline), docs_results.get(pipeline)
    if doc_late is None and doc_results is None:
        raise ValueError(f"reconcile: neither table records pipeline {pipeline!r} (they record: "
                         f"{', '.join(names) or 'none'}); start its query once with this version, or name another")
    same = ("config", "keys")
    if doc_late is not None and doc_results is not None and [doc_late.get(k) for k in same] != [
            doc_results.get(k) for k in same]:
        raise ValueError(
            f"reconcile: the late table {late!r} and the results table {results.name} record different pipelines "
            f"under the name {pipeline!r} (window / aggregations / keys differ): give the two tables of one pipeline")
    return pipeline, {**(doc_late or {}), **(doc_results or {})}


def reconciled_ids(results: str | os.PathLike[str], pipeline: Optional[str] = None,
                   storage_options: Optional[Mapping[str, str]] = None) -> set[str]:
    """The ids (the late table's ``record_id``) of the late records that CORRECTION panes in the
    results table hold: the records reconcile has used."""
    import pyarrow.dataset as pds

    dataset = _dataset(os.fspath(results), storage_options)
    if LATE_RECORD_IDS not in dataset.schema.names:
        return set()
    expr = None if pipeline is None else pds.field("pipeline") == pipeline
    return _reconciled(dataset.to_table(columns=["pane_timing", LATE_RECORD_IDS], filter=expr))


def _ms(value: Any) -> int:
    """Epoch milliseconds of an instant (a ``datetime``, or already an ``int``)."""
    if isinstance(value, int):
        return value
    return (value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // _dt.timedelta(milliseconds=1)


def _current(rows: list[dict], names: list[str]) -> list[tuple[CurrentPane, dict]]:
    """The latest pane per key and window, without the sessions a later pane superseded."""
    def order(r: dict) -> tuple:
        return (r["written_at"], r["batch_id"])

    latest: dict[tuple, dict] = {}
    for r in rows:
        k = (r["key"], r["window_start"], r["window_end"])
        if k not in latest or (r["pane_index"], order(r)) > (latest[k]["pane_index"], order(latest[k])):
            latest[k] = r
    replaced: dict[tuple, tuple] = {}
    for r in rows:
        for b in r.get("merged_from") or ():
            k = (r["key"], _ms(b["start"]), _ms(b["end"]))
            replaced[k] = max(replaced.get(k, order(r)), order(r))
    return [(CurrentPane(r["key"], Window(_ms(r["window_start"]), _ms(r["window_end"])), r["pane_index"],
                         {n: r.get(n) for n in names}, bool(r["is_final"])), r)
            for k, r in latest.items() if k not in replaced or replaced[k] < order(r)]


def _watermark_proved(config: EngineConfig, table: Optional[pa.Table], late_watermarks: list) -> Optional[int]:
    """The highest watermark the tables prove the stream reached: a late record's, a fired
    window's ``end - 1``, a final pane's ``end - 1 + L``."""
    known = [w for w in late_watermarks if w is not None]
    if table is not None and table.num_rows:
        ends = table.column("window_end")
        final = pc.max(pc.filter(ends, table.column("is_final"))).as_py()
        fired = pc.max(pc.filter(ends, pc.is_in(table.column("pane_timing"), pa.array([ON_TIME, FINAL])))).as_py()
        known += [final - 1 + config.allowed_lateness_ms] if final is not None else []
        known += [fired - 1] if fired is not None else []
    return max(known) if known else None


def _reconciled(table: Optional[pa.Table]) -> set[str]:
    """The late records the results' CORRECTION panes hold."""
    if table is None or LATE_RECORD_IDS not in table.column_names:
        return set()
    ids = table.filter(pc.equal(table.column("pane_timing"), CORRECTION)).column(LATE_RECORD_IDS)
    return set(pc.list_flatten(ids).to_pylist()) if len(ids) else set()


def _rows_needed(config: EngineConfig, table: Optional[pa.Table], inputs: list[LateInput]) -> list[dict]:
    """The results' rows a run reads pane by pane: with fixed windows those of the late records'
    windows (picked in Arrow); with sessions every row (a key's sessions can merge without a late
    record: a session that started after an expired one at overlapping bounds)."""
    if table is None:
        return []
    if not config.window.merging:
        cache: dict = {}
        wanted = pa.array(list({f"{w.start_ms}|{r.key}" for r in inputs
                                for w in windows_of(config.window, r.ts_ms, cache)}), pa.string())
        ids = pc.binary_join_element_wise(pc.cast(table.column("window_start"), pa.string()), table.column("key"), "|")
        table = table.filter(pc.is_in(ids, wanted))
    return table.to_pylist()


def reconcile(
    late: str | os.PathLike[str],
    results: Any,
    pipeline: Optional[str] = None,
    since: Optional[_dt.datetime] = None,
    watermark_ms: Optional[int] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    engine: str = "auto",
    spark: Any = None,
    dry_run: bool = False,
) -> ReconcileReport:
    """Merge the too-late records not yet reconciled into the results table as CORRECTION panes.

    Args:
        late: the pipeline's late-data Delta table.
        results: its results: a Delta table's path (appends or ``mode="upsert"``), or the
            :class:`~eventtime.sinks.PostgresSink` that writes its PostgreSQL table.
        pipeline: the pipeline to reconcile (needed when the tables hold several).
        since: only late records detected at or after this instant.
        watermark_ms: the stream's watermark, when known (a stream that ended: ``END_OF_INPUT_MS``);
            by default the highest the tables prove. Sessions are corrected once closed under it.
        engine, spark: how the results table is written (:class:`~eventtime.DeltaResultsSink`);
            ``spark`` also merges a pipeline's mergeable Spark SQL aggregations (by default the
            active session, else a local one started for it).
        dry_run: plan and report, write nothing.

    Example:
        ``eventtime.reconcile("/data/late", "/data/results").reconciled``
    """
    started = time.perf_counter()
    late = os.fspath(late)
    _refuse_late(late, storage_options, spark)
    store = open_results(results, storage_options, engine, spark)
    with one_run_at_a_time(late):
        return _run(late, store, pipeline, since, watermark_ms, storage_options, dry_run, started, spark)


def _run(late: str, store: Any, pipeline: Optional[str], since: Optional[_dt.datetime], watermark_ms: Optional[int],
         storage_options: Optional[Mapping[str, str]], dry_run: bool, started: float, spark: Any) -> ReconcileReport:
    if pipeline is None and not store.key_column:
        pipeline = store.sink.pipeline
    pipeline, document = _pipeline(late, store, pipeline, storage_options)
    config, keys = EngineConfig.from_spec(document["config"]), list(document["keys"])
    merger = None
    if any(agg.mergeable for agg in config.aggregations):  # Spark SQL ones: merged by Spark's own functions
        from ..spark.pane_merge import merging_session

        merger = merging_session(config, document, pipeline, spark)
    import pyarrow.dataset as pds

    results_table, res_schema = store.read(pipeline, keys)
    names = pane_columns(config.aggregations)  # a table written before the accumulator columns lacks them
    present = results_table.column_names if results_table is not None else ()
    missing = [n for n in (*keys, *(a.name for a in config.aggregations)) if results_table is not None and n not in present]
    if missing:
        raise ValueError(f"reconcile: the results table {store.name} has no column(s) {', '.join(missing)} of "
                         f"pipeline {pipeline!r}'s keys and aggregations: is it the table of another pipeline?")
    done = _reconciled(results_table)
    late_ds = _dataset(late, storage_options)
    expr = (pds.field("pipeline") == pipeline) & pds.field("reason").isin([TOO_LATE, PARTLY_LATE])
    if since is not None:
        expr = expr & (pds.field("detected_at") >= pa.scalar(since, TS))
    wanted = [c for c in ("record_id", "key", "event_time", "watermark", "window_end", "reason", "payload", *keys)
              if c in late_ds.schema.names]
    late_table = late_ds.to_table(columns=wanted, filter=expr)
    for name in ("event_time", "watermark", "window_end"):
        late_table = late_table.set_column(late_table.column_names.index(name), name,
                                           pc.divide(pc.cast(late_table.column(name), pa.int64()), 1000))
    late_rows = late_table.to_pylist()
    left: dict[str, list[str]] = {}
    no_id = [r for r in late_rows if r.get("record_id") is None]
    if no_id:
        left[NO_RECORD_ID] = [f"{r['key']}@{r['event_time']}" for r in no_id]
    pending = [r for r in late_rows if r.get("record_id") is not None and r["record_id"] not in done]
    values, bad = late_values(config, [r["payload"] for r in pending], res_schema)
    if merger is not None:
        from ..spark.pane_merge import unreadable_payloads

        readable = [i for i in range(len(pending)) if i not in bad]
        unread = unreadable_payloads(merger, document["record_type"], [pending[i]["payload"] for i in readable])
        bad.update({readable[j]: why for j, why in unread.items()})
    for i in sorted(bad):
        left.setdefault(PAYLOAD_UNREADABLE, []).append(pending[i]["record_id"])
    inputs = [LateInput(r["record_id"], r["key"], r["event_time"], r["watermark"], v,
                        r.get("window_end") if r.get("reason") == PARTLY_LATE else None)
              for i, (r, v) in enumerate(zip(pending, values)) if i not in bad]
    res_rows = _rows_needed(config, results_table, inputs)
    current = _current(res_rows, names)
    proved = _watermark_proved(config, results_table, [r["watermark"] for r in late_rows])
    plan = plan_corrections(config, [c for c, _ in current], inputs,
                            watermark_ms if watermark_ms is not None else proved)
    why: dict[str, list[str]] = {}
    for u in plan.left:
        left.setdefault(u.reason, []).append(u.record_id)
        if u.detail and u.detail not in why.setdefault(u.reason, []):
            why[u.reason].append(u.detail)
    if merger is not None and plan.corrections:
        from ..spark.pane_merge import merge_in_spark

        plan.corrections = merge_in_spark(merger, config, document["record_type"], plan.corrections,
                                          {r["record_id"]: r["payload"] for r in pending})
    used = {i for c in plan.corrections for i in c.record_ids}
    report = ReconcileReport(pipeline, None, False, len(late_rows), len(used), len(plan.corrections),
                             sum(1 for c in plan.corrections if c.merged_from), left,
                             _totals_change(config, [c for c, _ in current], plan.corrections),
                             watermark_ms if watermark_ms is not None else proved, 0.0, why=why)
    if plan.corrections and not dry_run:
        table = _correction_table(config, keys, plan.corrections, res_schema, current, pending, store.key_column)
        report.run, outcome = store.write(table, pipeline, keys, document, fault_point)
        report.written, report.skipped = outcome.written, outcome.skipped
    report.already = sum(1 for r in late_rows if r.get("record_id") in done)
    report.seconds = time.perf_counter() - started
    return report


def _totals_change(config: EngineConfig, current: list[CurrentPane], corrections: list) -> dict[str, Any]:
    """How much the corrections move the totals of the pipeline's counts and sums: each
    correction's value less those of the panes it replaces (its window's, the sessions it merges)."""
    panes = {(p.key, p.window): p for p in current}
    change: dict[str, Any] = {}
    for agg in config.aggregations:
        if agg.kind in (COUNT, SUM_KIND):
            total = 0
            for c in corrections:
                total += c.values.get(agg.name) or 0
                for w in {c.window, *c.merged_from}:
                    if (c.key, w) in panes:
                        total -= panes[(c.key, w)].values.get(agg.name) or 0
            change[agg.name] = total
    return change


def _correction_table(config: EngineConfig, keys: list[str], corrections: list, schema: pa.Schema,
                      current: list[tuple[CurrentPane, dict]], pending: list[dict], key_column: bool) -> pa.Table:
    needed = {c.key for c in corrections}
    key_values: dict[Any, dict] = {}
    for row in (*(row for _, row in current), *pending):
        if row["key"] in needed and row["key"] not in key_values:
            key_values[row["key"]] = {k: row.get(k) for k in keys}

    def typed(name: str, values: list) -> pa.Array:
        return pa.array(values).cast(schema.field(name).type) if name in schema.names else pa.array(values)

    cols: dict[str, pa.Array] = {k: typed(k, [key_values[c.key][k] for c in corrections]) for k in keys}
    if key_column:
        cols["key"] = pa.array([c.key for c in corrections], pa.string())
    def to_ts(ms: list[int]) -> pa.Array:
        return pc.multiply(pa.array(ms, pa.int64()), 1000).cast(TS)

    cols["window_start"] = to_ts([c.window.start_ms for c in corrections])
    cols["window_end"] = to_ts([c.window.end_ms for c in corrections])
    cols["pane_timing"] = pa.array([CORRECTION] * len(corrections), pa.string())
    cols["pane_index"] = pa.array([c.index for c in corrections], pa.int64())
    cols["is_final"] = pa.array([True] * len(corrections), pa.bool_())
    for name in pane_columns(config.aggregations):
        values = [c.values.get(name) for c in corrections]
        if name in schema.names or any(v is not None for v in values):  # a column of no type yet: left to the table
            cols[name] = typed(name, values)
    if config.window.merging:
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        cols["merged_from"] = pa.array([[{"start": epoch + _dt.timedelta(milliseconds=w.start_ms),
                                          "end": epoch + _dt.timedelta(milliseconds=w.end_ms)} for w in c.merged_from]
                                        for c in corrections], MERGED_FROM_TYPE)
    # every late record the window holds, those of its earlier CORRECTION panes too: an upsert table
    # keeps only the window's last row, and reconcile reads the records it used from the table
    earlier = {(p.key, p.window): ids for p, row in current if (ids := row.get(LATE_RECORD_IDS))}

    def held(c: Any) -> list[str]:
        before = [i for w in (c.window, *c.merged_from) for i in earlier.get((c.key, w), ())]
        return sorted({*c.record_ids, *before}) if before else list(c.record_ids)

    cols[LATE_RECORD_IDS] = pa.array([held(c) for c in corrections], pa.list_(pa.string()))
    return pa.table(cols)


def reconciliation(late: str | os.PathLike[str], results: str | os.PathLike[str], pipeline: Optional[str] = None,
                   storage_options: Optional[Mapping[str, str]] = None) -> dict:
    """How far reconcile has come: the too-late records of the late table, how many of them the
    results table's CORRECTION panes hold, in how many runs, and how much the corrections moved
    the totals of the counts and sums (latest panes with them against without them)."""
    import pyarrow.dataset as pds

    from ..sinks.tables import latest_panes

    late, results = os.fspath(late), os.fspath(results)
    pipeline, document = _pipeline(late, open_results(results, storage_options, "rust", None), pipeline,
                                   storage_options)
    config = EngineConfig.from_spec(document["config"])
    expr = (pds.field("pipeline") == pipeline) & pds.field("reason").isin([TOO_LATE, PARTLY_LATE])
    late_ds = _dataset(late, storage_options)
    ids = late_ds.to_table(columns=["record_id"] if "record_id" in late_ds.schema.names else [], filter=expr)
    done = reconciled_ids(results, pipeline, storage_options) if _exists(results, storage_options) else set()
    known = set(ids.column("record_id").to_pylist()) if "record_id" in ids.column_names else set()
    runs = 0
    change: dict[str, Any] = {}
    if _exists(results, storage_options):
        res = _dataset(results, storage_options)
        if "pane_timing" in res.schema.names:
            batches = res.to_table(columns=["batch_id"], filter=(pds.field("pipeline") == pipeline) & (
                pds.field("pane_timing") == CORRECTION) & (pds.field("query_id") == RECONCILE_QUERY)).column("batch_id")
            runs = len(set(batches.to_pylist()))
        if runs:
            with_, without = (latest_panes(results, storage_options, pipeline, corrections=c) for c in (True, False))
            for agg in config.aggregations:
                if agg.kind in (COUNT, SUM_KIND):
                    change[agg.name] = with_[agg.name].sum() - without[agg.name].sum()
    return {"pipeline": pipeline, "too_late": ids.num_rows, "reconciled": len(known & done), "runs": runs,
            "totals_change": {k: (int(v) if float(v).is_integer() else float(v)) for k, v in change.items()}}
