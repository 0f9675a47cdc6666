"""Reconciliation: too-late records merged into their windows' latest panes as CORRECTION
panes, so that the results converge to what one bounded run over all the records gives
(docs/semantics.md, "Reconciliation"). Pure Python: the tables are read and written by
:mod:`eventtime.query.reconcile`.

>>> from eventtime.core.config import EngineConfig
>>> from eventtime.core.window import Tumbling, Window
>>> from eventtime.core.aggregations import count, sum
>>> config = EngineConfig(Tumbling(1000), aggregations=(count(), sum("v")))
>>> current = [CurrentPane("k", Window(0, 1000), index=0, values={"count": 2, "sum_v": 5})]
>>> late = [LateInput("r1", "k", 400, watermark_ms=2000, values={"v": 3})]
>>> plan = plan_corrections(config, current, late)
>>> [(c.window, c.index, dict(c.values), c.record_ids) for c in plan.corrections]
[(Window(start_ms=0, end_ms=1000), 1, {'count': 3, 'sum_v': 8}, ('r1',))]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, Optional

from .aggregations import NOT_IN_PANE, Aggregation
from .config import EngineConfig
from .contract import STRINGS
from .kinds import BUILTIN_AGGREGATIONS, SQL_AGGREGATE
from .trigger import ACCUMULATING, FINAL_ONLY, is_expired
from .window import Session, Window

__all__ = [
    "CORRECTION", "MERGEABLE_FROM_PANE", "NOT_MERGEABLE", "WINDOW_OPEN", "CurrentPane", "LateInput",
    "Correction", "Unreconciled", "ReconcilePlan", "SparkMerge", "unmergeable", "plan_corrections", "windows_of",
]

#: The pane timing of a pane written by reconciliation (not by the engine).
CORRECTION = STRINGS["CORRECTION"]
#: Aggregations whose pane holds their whole accumulator (``Aggregation.accumulator_columns``), so
#: that a pane merges with more records; and Spark SQL ones made ``mergeable`` (their buffer).
MERGEABLE_FROM_PANE = BUILTIN_AGGREGATIONS
#: Why a too-late record is left unreconciled: the pipeline has an aggregation that cannot merge
#: into a pane (user-defined, Spark SQL without ``mergeable``), or its window's pane lacks the
#: accumulator ...
NOT_MERGEABLE = "aggregation_not_mergeable"
#: ... or the session it would join is not yet known to be closed (a later run takes it).
WINDOW_OPEN = "window_open"


@dataclass(frozen=True)
class CurrentPane:
    """The latest pane of a key's window (a session not superseded) in the results."""

    key: Hashable
    window: Window
    index: int
    values: Mapping[str, Any]
    is_final: bool = False


@dataclass(frozen=True)
class LateInput:
    """A too-late record to reconcile: its id, key, event time, the watermark that found it late
    and its values of the aggregations' columns; a partly late one (``partly_late``), the end of
    the last window it missed (the others counted it)."""

    record_id: str
    key: Hashable
    ts_ms: int
    watermark_ms: Optional[int]
    values: Mapping[str, Any] = field(default_factory=dict)
    missed_until_ms: Optional[int] = None


@dataclass(frozen=True)
class Correction:
    """A CORRECTION pane: the window (a session's new bounds), its index (the next one of the
    window, or of the sessions it merges), the values, the sessions it supersedes, and the
    late records it holds."""

    key: Hashable
    window: Window
    index: int
    values: Mapping[str, Any]
    merged_from: tuple[Window, ...] = ()
    record_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unreconciled:
    """A record left for later (``WINDOW_OPEN``) or that cannot be reconciled, and why."""

    record_id: str
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class SparkMerge:
    """A Spark SQL aggregation's columns of a correction, which Spark's own merge computes
    (:mod:`eventtime.spark.pane_merge`): the buffers of the panes merged (written bytes) and
    the late records added."""

    buffers: tuple[bytes, ...]
    record_ids: tuple[str, ...]


@dataclass
class ReconcilePlan:
    corrections: list[Correction] = field(default_factory=list)
    left: list[Unreconciled] = field(default_factory=list)


def unmergeable(config: EngineConfig) -> list[Aggregation]:
    """The pipeline's aggregations that cannot merge more records into a pane's value."""
    return [agg for agg in config.aggregations if agg.kind not in MERGEABLE_FROM_PANE and not agg.mergeable]


def _values(config: EngineConfig, panes: list[CurrentPane], records: list[LateInput]) -> Optional[dict[str, Any]]:
    """The correction's columns (each aggregation's ``pane_values``): the records added as
    ``add`` does one at a time -- with accumulating panes (and FINAL ones, which hold everything)
    merged with the panes' accumulators; discarding, the records' alone. None when a pane does
    not hold an accumulator (written before the accumulator columns). A Spark SQL aggregation's
    columns are a :class:`SparkMerge`, for Spark to compute."""
    accumulating = config.accumulation == ACCUMULATING or config.emit == FINAL_ONLY
    out: dict[str, Any] = {}
    for agg in config.aggregations:
        if agg.mergeable:
            buffers = [agg.from_pane(pane.values) for pane in panes] if accumulating else []
            if any(b is NOT_IN_PANE for b in buffers):
                return None
            out[agg.name] = SparkMerge(tuple(buffers), tuple(r.record_id for r in records))
            continue
        acc = agg.create()
        for rec in records:
            acc = agg.add(acc, rec.values.get(agg.column) if agg.column else None, rec.ts_ms)
        if accumulating:
            for pane in panes:
                held = agg.from_pane(pane.values)
                if held is NOT_IN_PANE:
                    return None
                acc = agg.merge(acc, held)
        out.update(agg.pane_values(acc))
    return out


def windows_of(assigner: Any, ts_ms: int, cache: dict) -> list[Window]:
    """``assigner.assign(ts_ms)``, once per slice (the windows of a slice are its records')."""
    start = assigner.slice_start(ts_ms)
    windows = cache.get(start)
    if windows is None:
        windows = cache[start] = assigner.assign(ts_ms)
    return windows


def _known_watermark(watermark_ms: Optional[int], records: Iterable[LateInput]) -> Optional[int]:
    known = [w for w in (watermark_ms, *(r.watermark_ms for r in records)) if w is not None]
    return max(known) if known else None


def plan_corrections(
    config: EngineConfig,
    current: Iterable[CurrentPane],
    late: Iterable[LateInput],
    watermark_ms: Optional[int] = None,
) -> ReconcilePlan:
    """The CORRECTION panes that merge ``late`` (too-late records not yet reconciled) into the
    ``current`` panes (the latest pane of each key and window).

    A fixed window's records merge into its latest pane (or make its first pane, index 0). A
    session's records join, per key, the current sessions they overlap (``Session.merge``); a
    group that holds a record, or that joins two current sessions, becomes one pane whose
    ``merged_from`` lists the sessions it supersedes -- once the group is known to be closed
    (``is_expired`` at ``watermark_ms`` or a record's own watermark), else its records are left
    ``WINDOW_OPEN``. A pipeline with an aggregation outside :data:`MERGEABLE_FROM_PANE` (and not a
    ``mergeable`` Spark SQL one) leaves every record ``NOT_MERGEABLE``.
    """
    late = list(late)
    plan = ReconcilePlan()
    refused = unmergeable(config)
    if refused:
        names = ", ".join(f"{agg.name} ({agg.kind})" for agg in refused)
        hint = ("; make a Spark SQL one eventtime.agg(..., mergeable=True) (a Python one, which the Spark engine "
                "runs as collect_list, does not merge)") if any(a.kind == SQL_AGGREGATE for a in refused) else ""
        plan.left = [Unreconciled(r.record_id, NOT_MERGEABLE, f"the pipeline's {names} cannot merge into a pane's "
                                  f"value{hint}") for r in late]
        return plan
    panes: dict[Hashable, dict[Window, CurrentPane]] = {}
    for pane in current:
        panes.setdefault(pane.key, {})[pane.window] = pane
    by_key: dict[Hashable, list[LateInput]] = {}
    for rec in late:
        by_key.setdefault(rec.key, []).append(rec)
    known = _known_watermark(watermark_ms, late)
    lateness = config.allowed_lateness_ms
    if isinstance(config.window, Session):
        keys = list(by_key) + [k for k in panes if k not in by_key]
        for key in keys:
            _plan_sessions(config, key, panes.get(key, {}), by_key.get(key, []), known, lateness, plan)
        return plan
    cache: dict = {}
    for key, records in by_key.items():
        windows: dict[Window, list[LateInput]] = {}
        for rec in records:
            for window in windows_of(config.window, rec.ts_ms, cache):
                if rec.missed_until_ms is None or window.end_ms <= rec.missed_until_ms:
                    windows.setdefault(window, []).append(rec)
        for window, members in sorted(windows.items()):
            pane = panes.get(key, {}).get(window)
            values = _values(config, [pane] if pane is not None else [], members)
            if values is None:
                plan.left.extend(_no_accumulator(r, window) for r in members)
                continue
            plan.corrections.append(Correction(key, window, 0 if pane is None else pane.index + 1, values,
                                               record_ids=tuple(sorted(r.record_id for r in members))))
    return plan


def _no_accumulator(record: LateInput, window: Window) -> Unreconciled:
    return Unreconciled(record.record_id, NOT_MERGEABLE, f"the pane of {window} does not hold the accumulators "
                        f"(written before eventtime carried them, or before a Spark SQL aggregation was mergeable, or "
                        f"a mean's sum outside bigint)")


def _plan_sessions(config: EngineConfig, key: Hashable, panes: dict[Window, CurrentPane], records: list[LateInput],
                   known: Optional[int], lateness: int, plan: ReconcilePlan) -> None:
    gap = config.window.gap_ms
    groups = Session.merge([*panes, *(Window(r.ts_ms, r.ts_ms + gap) for r in records)])
    for group in groups:
        inside = [p for w, p in panes.items() if group.start_ms <= w.start_ms and w.end_ms <= group.end_ms]
        members = [r for r in records if group.start_ms <= r.ts_ms < group.end_ms]
        if not members and len(inside) < 2:
            continue
        if not is_expired(group, known, lateness):
            plan.left.extend(Unreconciled(r.record_id, WINDOW_OPEN, f"its session {group} is not closed yet")
                             for r in members)
            continue
        index = 1 + max((p.index for p in inside), default=-1)
        merged_from = tuple(sorted(p.window for p in inside if p.window != group))
        values = _values(config, inside, members)
        if values is None:
            plan.left.extend(_no_accumulator(r, group) for r in members)
            continue
        plan.corrections.append(Correction(key, group, index, values, merged_from,
                                           tuple(sorted(r.record_id for r in members))))
