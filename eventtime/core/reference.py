"""The reference model: a plain, obviously-correct driver of docs/semantics.md.

No Spark import. It keeps one state per (key, window) and applies the four steps of a
micro-batch literally; the Spark engine is held to its output by the transcript and
property tests.

>>> from eventtime import EngineConfig, Tumbling
>>> engine = ReferenceEngine(EngineConfig(Tumbling(3000), min_valid_ms=1))
>>> result = engine.process_batch([Record("k", 1000), Record(None, 2999, heartbeat=True)], now_ms=10_000)
>>> [(p.window, p.timing, p.values["count"]) for p in result.panes]
[(Window(start_ms=0, end_ms=3000), 'ON_TIME', 1)]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from ._duration import event_zone
from .config import EngineConfig
from .kinds import SQL_AGGREGATE
from .timestamps import PARTLY_LATE, TOO_LATE, extract
from .trigger import DISCARDING, END_OF_INPUT_MS, FINAL, FINAL_ONLY, LATE, ON_TIME, is_due, is_expired, next_watermark
from .watermark import PartitionClocks, WatermarkStep
from .window import Session, Window

__all__ = ["Record", "Pane", "LateRecord", "InvalidRecord", "BatchResult", "ReferenceEngine"]


@dataclass(frozen=True)
class Record:
    """One input row: its key, its raw event time and the columns the aggregations read."""

    key: Any
    ts: Any
    fields: Mapping[str, Any] = field(default_factory=dict)
    heartbeat: bool = False
    partition: Any = None


@dataclass(frozen=True)
class Pane:
    key: Any
    window: Window
    timing: str
    index: int
    is_final: bool
    values: Mapping[str, Any]
    #: Sessions only: the bounds of earlier panes of this key that this pane supersedes
    #: (sessions merged into this one, or the session itself before it grew), ordered by start.
    merged_from: tuple[Window, ...] = ()


@dataclass(frozen=True)
class LateRecord:
    record: Record
    ts_ms: int
    reason: str
    watermark_ms: Optional[int]
    windows: tuple[Window, ...]


@dataclass(frozen=True)
class InvalidRecord:
    record: Record
    reason: str


@dataclass
class BatchResult:
    watermark_ms: Optional[int]
    panes: list[Pane] = field(default_factory=list)
    late: list[LateRecord] = field(default_factory=list)
    invalid: list[InvalidRecord] = field(default_factory=list)


@dataclass
class _WindowState:
    everything: list
    since_last_pane: list
    fired: bool = False
    next_index: int = 0
    # sessions: the bounds of this lineage's panes that are still shown as current
    shown: frozenset = frozenset()


class ReferenceEngine:
    """Applies docs/semantics.md one micro-batch at a time."""

    def __init__(
        self, config: EngineConfig, unit: Optional[str] = None, fmt: Optional[str] = None, tz: Optional[str] = None
    ) -> None:
        """``unit``, ``fmt`` and ``tz`` are the timestamp extraction settings of
        :func:`eventtime.core.timestamps.parse_timestamp` (``with_event_time`` on Spark)."""
        if not isinstance(config, EngineConfig):
            raise TypeError(f"config must be an EngineConfig, got {type(config).__name__}")
        event_zone(tz)  # a bad zone fails here, naming "tz"
        for agg in config.aggregations:
            if agg.kind == SQL_AGGREGATE:
                raise ValueError(f"aggregation {agg.name!r} ({agg.expression}) is a Spark SQL aggregate: it runs on the "
                                 f"Spark engine (window_aggregate), not in the reference model")
        self.config = config
        self._unit = unit
        self._fmt = fmt
        self._tz = tz
        self.watermark_ms: Optional[int] = None
        self._state: dict[tuple[Any, Window], _WindowState] = {}
        self._clocks = PartitionClocks(config.watermark, config.max_out_of_orderness_ms)
        #: Per-partition mode: the last batch's step (idle / active changes, hold-back).
        self.last_step: Optional[WatermarkStep] = None

    def state_windows(self) -> set[tuple[Any, Window]]:
        """The (key, window) pairs that hold state now."""
        return set(self._state)

    def _pane(self, key: Any, window: Window, st: _WindowState, timing: str, is_final: bool) -> Pane:
        accs = st.since_last_pane if self.config.accumulation == DISCARDING and timing != FINAL else st.everything
        values = {name: v for agg, acc in zip(self.config.aggregations, accs) for name, v in agg.pane_values(acc).items()}
        merged_from = tuple(sorted(st.shown - {window}))
        pane = Pane(key, window, timing, st.next_index, is_final, values, merged_from)
        st.next_index += 1
        st.fired = True
        st.since_last_pane = [agg.create() for agg in self.config.aggregations]
        if self.config.window.merging:
            st.shown = frozenset({window})
        return pane

    def _new_state(self) -> _WindowState:
        aggs = self.config.aggregations
        return _WindowState([agg.create() for agg in aggs], [agg.create() for agg in aggs])

    def _add(self, st: _WindowState, record: Record, ts_ms: int) -> None:
        for i, agg in enumerate(self.config.aggregations):
            value = record.fields.get(agg.column) if agg.column is not None else None
            st.everything[i] = agg.add(st.everything[i], value, ts_ms)
            st.since_last_pane[i] = agg.add(st.since_last_pane[i], value, ts_ms)

    def _merge_states(self, parts: list[_WindowState], window: Window, part_windows: list[Window]) -> _WindowState:
        """One session's state from the states of the sessions merged into it (docs/semantics.md)."""
        st = self._new_state()
        for part in parts:
            for i, agg in enumerate(self.config.aggregations):
                st.everything[i] = agg.merge(st.everything[i], part.everything[i])
                st.since_last_pane[i] = agg.merge(st.since_last_pane[i], part.since_last_pane[i])
            st.next_index = max(st.next_index, part.next_index)
            st.shown |= part.shown
        # fired at these very bounds: a part with the same bounds had fired
        st.fired = any(part.fired and w == window for part, w in zip(parts, part_windows))
        return st

    def _add_to_sessions(self, batch: list[tuple[Record, int]], watermark: Optional[int], result: BatchResult,
                         touched: dict) -> None:
        """Step 2 for sessions: per key, merge the batch's records with each other and with the
        live sessions; a record is late only when the session it ends up in is expired."""
        cfg = self.config
        gap = cfg.window.gap_ms
        by_key: dict[Any, list[tuple[Record, int]]] = {}
        for record, ts_ms in batch:
            by_key.setdefault(record.key, []).append((record, ts_ms))
        sessions_of: dict[Any, list[Window]] = {}
        for k, w in self._state:
            if k in by_key:
                sessions_of.setdefault(k, []).append(w)
        for key, records in by_key.items():
            live = sessions_of.get(key, [])
            components = Session.merge(live + [Window(ts, ts + gap) for _, ts in records])
            for session in components:
                members = [w for w in live if session.start_ms <= w.start_ms < session.end_ms]
                mine = [(r, ts) for r, ts in records if session.start_ms <= ts < session.end_ms]
                if not mine:
                    continue
                if not members and is_expired(session, watermark, cfg.allowed_lateness_ms):
                    for r, ts in mine:
                        result.late.append(LateRecord(r, ts, TOO_LATE, watermark, (session,)))
                    continue
                st = self._merge_states([self._state.pop((key, w)) for w in members], session, members)
                for r, ts in mine:
                    self._add(st, r, ts)
                self._state[(key, session)] = st
                for w in members:
                    touched.pop((key, w), None)
                touched[(key, session)] = None

    def process_batch(self, records: Iterable[Record], now_ms: Optional[int] = None,
                      processing_time_ms: Optional[int] = None, end_of_input: bool = False) -> BatchResult:
        """One micro-batch. ``now_ms`` is the time the timestamp checks use (``max_future``);
        ``processing_time_ms`` (default ``now_ms``) is the batch's time for idleness.

        ``end_of_input=True``: the batch is the last of a bounded input, and the watermark goes
        from it straight to ``END_OF_INPUT_MS``. A static DataFrame is that one batch (Flink's
        batch execution mode): every window fires once, final, and is purged.

        >>> from eventtime import EngineConfig, Tumbling
        >>> engine = ReferenceEngine(EngineConfig(Tumbling(3000), min_valid_ms=1))
        >>> [(p.timing, p.is_final) for p in engine.process_batch([Record("k", 1000), Record("k", 9000)],
        ...                                                       now_ms=10_000, end_of_input=True).panes]
        [('ON_TIME', True), ('ON_TIME', True)]
        """
        cfg = self.config
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        watermark = self.watermark_ms
        result = BatchResult(watermark_ms=None)
        max_seen: Optional[int] = None
        max_by_partition: dict[Any, int] = {}
        touched: dict[tuple[Any, Window], None] = {}

        # Steps 1 and 2: classify, then add every valid record to its live windows.
        sessions: list[tuple[Record, int]] = []
        for record in records:
            ts_ms, reason = extract(record.ts, now_ms, cfg.min_valid_ms, cfg.max_future_ms, self._unit, self._fmt, self._tz)
            if reason is not None:
                result.invalid.append(InvalidRecord(record, reason))
                continue
            max_seen = ts_ms if max_seen is None else max(max_seen, ts_ms)
            p = record.partition
            max_by_partition[p] = ts_ms if p not in max_by_partition else max(max_by_partition[p], ts_ms)
            if record.heartbeat:
                continue
            if cfg.window.merging:
                sessions.append((record, ts_ms))
                continue
            windows = cfg.window.assign(ts_ms)
            live = [w for w in windows if not is_expired(w, watermark, cfg.allowed_lateness_ms)]
            if not live:
                result.late.append(LateRecord(record, ts_ms, TOO_LATE, watermark, tuple(windows)))
                continue
            if cfg.report_partly_late and len(live) < len(windows):
                missed = tuple(w for w in windows if w not in live)
                result.late.append(LateRecord(record, ts_ms, PARTLY_LATE, watermark, missed))
            for window in live:
                st = self._state.get((record.key, window))
                if st is None:
                    st = self._new_state()
                    self._state[(record.key, window)] = st
                self._add(st, record, ts_ms)
                touched[(record.key, window)] = None
        if sessions:
            self._add_to_sessions(sessions, watermark, result, touched)

        if cfg.emit != FINAL_ONLY:
            for key, window in touched:
                st = self._state[(key, window)]
                # a fixed window that fired is due; a session that grew past W is not (it fires ON_TIME at its new end)
                if is_due(window, watermark):
                    result.panes.append(self._pane(key, window, st, LATE, is_final=False))

        # Step 3: advance the watermark, fire what is due, purge what expired.
        if cfg.watermark.per_partition:
            self.last_step = self._clocks.advance(
                watermark, max_by_partition, now_ms if processing_time_ms is None else processing_time_ms)
            new_watermark = self.last_step.watermark_ms
        else:
            new_watermark = next_watermark(watermark, max_seen, cfg.max_out_of_orderness_ms)
        self._advance(END_OF_INPUT_MS if end_of_input else new_watermark, result)
        return result

    def end_of_input(self) -> BatchResult:
        """The input is bounded and has ended: the watermark jumps to ``END_OF_INPUT_MS``.

        Every window still held fires (ON_TIME with ``is_final``, or FINAL) and is purged,
        as Flink does at the end of a bounded stream (docs/semantics.md, "End of input").

        >>> from eventtime import EngineConfig, Tumbling
        >>> engine = ReferenceEngine(EngineConfig(Tumbling(3000), min_valid_ms=1))
        >>> _ = engine.process_batch([Record("k", 1000)], now_ms=10_000)
        >>> [(p.timing, p.is_final) for p in engine.end_of_input().panes], engine.state_windows()
        ([('ON_TIME', True)], set())
        """
        result = BatchResult(watermark_ms=None)
        self._advance(END_OF_INPUT_MS, result)
        return result

    def _advance(self, new_watermark: Optional[int], result: BatchResult) -> None:
        """Steps 3 and 4: move the watermark, fire what is due, purge what expired."""
        cfg = self.config
        for (key, window), st in sorted(self._state.items(), key=lambda item: item[0][1]):
            expired = is_expired(window, new_watermark, cfg.allowed_lateness_ms)
            if cfg.emit == FINAL_ONLY:
                if expired:
                    result.panes.append(self._pane(key, window, st, FINAL, is_final=True))
            elif not st.fired and is_due(window, new_watermark):
                result.panes.append(self._pane(key, window, st, ON_TIME, is_final=expired))
            if expired:
                del self._state[(key, window)]
        self.watermark_ms = result.watermark_ms = new_watermark
