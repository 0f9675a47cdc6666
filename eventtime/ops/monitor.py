"""Per-batch statistics and the per-partition event-time skew monitor.

The Spark router builds one :class:`BatchStats` per micro-batch (with one
:class:`PartitionStats` per source partition) and hands it to the alerter. The
:class:`PartitionMonitor` keeps, across batches, the maximum event time and the
last time rows were seen for every source partition, and reports partitions that
lag behind the others (their records will be classified late once the watermark,
driven by the fastest partition, passes them) or that stopped sending.

Example:
    >>> mon = PartitionMonitor(lag_threshold_ms=60_000, idle_timeout_ms=None,
    ...                        clock=lambda: 0.0)
    >>> stats = BatchStats(batch_id=0, rows_in=3, panes=0, late=0, invalid=0,
    ...     watermark_ms=None,
    ...     partitions={"0": PartitionStats(max_event_time_ms=1_000_000, rows=2),
    ...                 "1": PartitionStats(max_event_time_ms=100_000, rows=1)})
    >>> [(f.partition, f.kind, f.lag_ms) for f in mon.observe(stats)]
    [('1', 'lag', 900000)]

Durations are integer milliseconds (``*_ms``) or :class:`datetime.timedelta`;
clock readings are seconds (``time.monotonic`` by default).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import timedelta
from typing import Callable, Mapping, Optional

from ..core._duration import human_ms
from ..core._duration import to_ms as _duration_ms
from ..core.watermark import GLOBAL, PER_PARTITION

__all__ = [
    "BatchStats",
    "PartitionStats",
    "PartitionFinding",
    "PartitionMonitor",
    "optional_ms",
    "progress_line",
]

log = logging.getLogger(__name__)


def optional_ms(value: object, name: str, *, allow_none: bool = True, minimum: int = 0) -> int | None:
    """A duration (int ms, ``timedelta`` or ``"10 minutes"``) as int ms, ``None`` kept when allowed.

    The argument order of ``_duration.to_ms``; raises ``TypeError`` / ``ValueError`` naming
    ``name`` on bad input.

    >>> optional_ms(timedelta(seconds=2), "cooldown"), optional_ms("1 minute", "lag")
    (2000, 60000)
    """
    if value is None:
        if allow_none:
            return None
        raise TypeError(f"{name} must be int milliseconds, timedelta or a string like '10 minutes', got None")
    ms = _duration_ms(value, name)
    if ms < minimum:
        raise ValueError(f"{name} must be >= {minimum} ms, got {ms}")
    return ms


def _check_int(name: str, value: object, *, optional: bool = False, minimum: int | None = 0) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


@dataclasses.dataclass(frozen=True)
class PartitionStats:
    """What one micro-batch saw from one source partition.

    ``max_event_time_ms`` is the maximum *valid* event time (epoch ms) of the
    partition's rows in this batch (``None`` when it sent only invalid rows);
    ``rows`` counts all its rows.

    >>> PartitionStats(max_event_time_ms=1_700_000_000_000, rows=10).rows
    10
    """

    max_event_time_ms: int | None
    rows: int

    def __post_init__(self) -> None:
        _check_int("max_event_time_ms", self.max_event_time_ms, optional=True, minimum=None)
        _check_int("rows", self.rows)


@dataclasses.dataclass(frozen=True)
class BatchStats:
    """Counts of one micro-batch, built by the router and passed to the alerter.

    >>> s = BatchStats(batch_id=7, rows_in=100, panes=4, late=3, invalid=1,
    ...                watermark_ms=None, partitions={})
    >>> s.late
    3
    """

    batch_id: int
    rows_in: int
    panes: int
    late: int
    invalid: int
    watermark_ms: int | None
    partitions: Mapping[str, PartitionStats] = dataclasses.field(default_factory=dict)
    #: Per-partition watermarks only (``watermark="per_partition"``): the partitions idle after
    #: this batch, those that became idle / active again in it, and the hold-back (the largest
    #: valid event time of all partitions minus W).
    idle_partitions: tuple = ()
    became_idle: tuple = ()
    became_active: tuple = ()
    holdback_ms: int | None = None
    #: Async enrichment (``eventtime.enrich_async``), per output column: what the Python
    #: workers did in this batch (``rows``, ``failed``, one count per failure reason,
    #: ``requests``, ``retries``, ``cache_hits``...) and the step's ``on_failure``.
    enrichment: Mapping[str, Mapping[str, object]] = dataclasses.field(default_factory=dict)
    #: Rows a sink's store refused in this batch (e.g. :class:`eventtime.sinks.PostgresSink`):
    #: per sink target, ``(row index in the batch's table, key, error)`` of each.
    rejected: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    #: How the watermark moves: ``"global"`` (the largest event time of all partitions minus
    #: B: a lagging partition's records turn late) or ``"per_partition"`` (the slowest active
    #: partition's: a lagging partition holds every window back instead).
    watermark_mode: str = GLOBAL
    #: When the batch's records were written by Spark's tasks (the alerter then gets a sample of
    #: them): per ``"kind/reason"``, the batch's ``count``, the ``partitions`` they came from and
    #: their ``max_lateness_ms``.
    records_by_reason: Mapping[str, Mapping[str, object]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_int("batch_id", self.batch_id)
        _check_int("rows_in", self.rows_in)
        _check_int("panes", self.panes)
        _check_int("late", self.late)
        _check_int("invalid", self.invalid)
        _check_int("watermark_ms", self.watermark_ms, optional=True, minimum=None)
        if self.watermark_mode not in (GLOBAL, PER_PARTITION):
            raise ValueError(f"watermark_mode must be 'global' or 'per_partition', got {self.watermark_mode!r}")
        if not isinstance(self.partitions, Mapping):
            raise TypeError(
                f"partitions must be a mapping of str to PartitionStats, got {type(self.partitions).__name__}"
            )
        for name, ps in self.partitions.items():
            if not isinstance(ps, PartitionStats):
                raise TypeError(
                    f"partitions[{name!r}] must be a PartitionStats, got {type(ps).__name__}"
                )
        if not isinstance(self.rejected, Mapping):
            raise TypeError(f"rejected must be a mapping of sink target to refused rows, got {type(self.rejected).__name__}")
        if not isinstance(self.enrichment, Mapping):
            raise TypeError(f"enrichment must be a mapping of output column to counts, got {type(self.enrichment).__name__}")


# PartitionFinding.kind
LAG = "lag"
IDLE = "idle"


@dataclasses.dataclass(frozen=True)
class PartitionFinding:
    """One skew finding: a partition that lags (``kind="lag"``) or is idle (``kind="idle"``)."""

    partition: str
    kind: str  # LAG | IDLE
    lag_ms: int | None
    idle_s: float | None
    max_event_time_ms: int | None
    global_max_event_time_ms: int | None
    threshold_ms: int | None

    def describe(self) -> str:
        """A one-line human description.

        >>> PartitionFinding("3", "lag", 90_000, None, 10, 90_010, 60_000).describe()
        'partition 3 lags the global max event time by 1 min 30 s (threshold 1 min)'
        """
        if self.kind == LAG:
            return (
                f"partition {self.partition} lags the global max event time by "
                f"{human_ms(self.lag_ms)} (threshold {human_ms(self.threshold_ms)})"
            )
        return (
            f"partition {self.partition} sent no rows for {self.idle_s:.1f} s "
            f"(idle timeout {self.threshold_ms / 1000:.1f} s)"
        )


@dataclasses.dataclass
class _PartitionState:
    max_event_time_ms: int | None = None
    last_seen_s: float | None = None
    rows_total: int = 0
    rows_last_batch: int = 0


class PartitionMonitor:
    """Tracks per source partition the max event time and the last time it sent rows.

    Args:
        lag_threshold_ms: a partition whose max event time is more than this behind
            the global max is reported (``kind="lag"``). ``None``: use
            ``global max - watermark`` when a watermark is known (the max
            out-of-orderness: records of such a partition fall behind the watermark),
            else no lag findings.
        idle_timeout_ms: a partition that sent no rows for longer than this is
            reported (``kind="idle"``); ``None`` disables idle detection.
        clock: returns seconds (monotonic); injectable for tests.

    Example:
        >>> now = [0.0]
        >>> mon = PartitionMonitor(lag_threshold_ms=None, idle_timeout_ms=5_000,
        ...                        clock=lambda: now[0])
        >>> _ = mon.observe(BatchStats(0, 1, 0, 0, 0, None,
        ...                 {"a": PartitionStats(10, 1)}))
        >>> now[0] = 6.0
        >>> [f.kind for f in mon.observe(BatchStats(1, 0, 0, 0, 0, None, {}))]
        ['idle']
    """

    def __init__(
        self,
        lag_threshold_ms: int | timedelta | None = None,
        idle_timeout_ms: int | timedelta | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lag_threshold_ms = optional_ms(lag_threshold_ms, "lag_threshold_ms")
        self.idle_timeout_ms = optional_ms(idle_timeout_ms, "idle_timeout_ms")
        if not callable(clock):
            raise TypeError(f"clock must be callable, got {type(clock).__name__}")
        self._clock = clock
        self._state: dict[str, _PartitionState] = {}
        # The pipeline's max out-of-orderness, set by route() when no threshold is given.
        self.default_lag_threshold_ms: int | None = None
        self._last_watermark_ms: int | None = None
        self._last_findings: list[PartitionFinding] = []

    @property
    def partitions(self) -> list[str]:
        """Partitions seen so far, sorted."""
        return sorted(self._state)

    def global_max_event_time_ms(self) -> int | None:
        """The maximum event time seen over all partitions (epoch ms), or ``None``."""
        values = [s.max_event_time_ms for s in self._state.values() if s.max_event_time_ms is not None]
        return max(values) if values else None

    def effective_lag_threshold_ms(self) -> int | None:
        """The lag threshold in use (explicit, or derived from the watermark)."""
        if self.lag_threshold_ms is not None:
            return self.lag_threshold_ms
        if self.default_lag_threshold_ms is not None:
            return self.default_lag_threshold_ms
        gmax = self.global_max_event_time_ms()
        if gmax is None or self._last_watermark_ms is None:
            return None
        return max(0, gmax - self._last_watermark_ms)

    def observe(self, stats: BatchStats) -> list[PartitionFinding]:
        """Fold one batch in and return the current findings (lagging and idle partitions)."""
        if not isinstance(stats, BatchStats):
            raise TypeError(f"stats must be a BatchStats, got {type(stats).__name__}")
        now = self._clock()
        for st in self._state.values():
            st.rows_last_batch = 0
        for name, ps in stats.partitions.items():
            key = str(name)
            st = self._state.setdefault(key, _PartitionState())
            st.rows_last_batch = ps.rows
            st.rows_total += ps.rows
            if ps.rows > 0:
                st.last_seen_s = now
            if ps.max_event_time_ms is not None and (
                st.max_event_time_ms is None or ps.max_event_time_ms > st.max_event_time_ms
            ):
                st.max_event_time_ms = ps.max_event_time_ms
        if stats.watermark_ms is not None:
            self._last_watermark_ms = stats.watermark_ms
        self._last_findings = self._findings(now)
        return list(self._last_findings)

    def _findings(self, now: float) -> list[PartitionFinding]:
        out: list[PartitionFinding] = []
        gmax = self.global_max_event_time_ms()
        threshold = self.effective_lag_threshold_ms()
        for name in sorted(self._state):
            st = self._state[name]
            if threshold is not None and gmax is not None and st.max_event_time_ms is not None:
                lag = gmax - st.max_event_time_ms
                if lag > threshold:
                    out.append(PartitionFinding(name, LAG, lag, None, st.max_event_time_ms, gmax, threshold))
            if self.idle_timeout_ms is not None and st.last_seen_s is not None:
                idle_s = now - st.last_seen_s
                if idle_s * 1000 > self.idle_timeout_ms:
                    out.append(
                        PartitionFinding(name, IDLE, None, idle_s, st.max_event_time_ms, gmax, self.idle_timeout_ms)
                    )
        return out

    def metrics(self) -> dict[str, dict[str, object]]:
        """Per partition figures as of the last :meth:`observe`.

        Returns ``{partition: {"max_event_time_ms", "lag_ms", "idle_s", "rows_total",
        "rows_last_batch", "lagging", "idle"}}``.
        """
        now = self._clock()
        gmax = self.global_max_event_time_ms()
        flagged = {(f.partition, f.kind) for f in self._last_findings}
        out: dict[str, dict[str, object]] = {}
        for name in sorted(self._state):
            st = self._state[name]
            out[name] = {
                "max_event_time_ms": st.max_event_time_ms,
                "lag_ms": (gmax - st.max_event_time_ms)
                if gmax is not None and st.max_event_time_ms is not None
                else None,
                "idle_s": (now - st.last_seen_s) if st.last_seen_s is not None else None,
                "rows_total": st.rows_total,
                "rows_last_batch": st.rows_last_batch,
                "lagging": (name, LAG) in flagged,
                "idle": (name, IDLE) in flagged,
            }
        return out


def progress_line(pipeline: str, stats: BatchStats, seconds: float, tick: bool = False,
                  ran_at_ms: Optional[int] = None) -> str:
    """One batch for a person: its input rows (the records of the source, not the watermark's
    tick rows), panes, late and invalid records, the watermark (``none`` before any valid event
    time) and how long the batch took. ``ran_at_ms``: the watermark the batch ran at, when the
    driver knows it (a batch with no output row shows it, not the last watermark rows showed).

    >>> progress_line("orders", BatchStats(batch_id=3, rows_in=2000, panes=340, late=12, invalid=3,
    ...               watermark_ms=1_714_557_800_000), 0.84)
    'eventtime[orders] batch 3: 2,000 rows, 340 panes, 12 late, 3 invalid, watermark 2024-05-01 10:03:20 UTC (0.8 s)'
    """
    import datetime as _dt

    from ..core.trigger import END_OF_INPUT_MS

    if ran_at_ms is not None and ran_at_ms > (stats.watermark_ms or 0):
        stats = dataclasses.replace(stats, watermark_ms=ran_at_ms)
    if stats.watermark_ms is None or stats.watermark_ms <= 0:  # Spark's 0: no watermark yet
        watermark = "none"
    elif stats.watermark_ms >= END_OF_INPUT_MS:
        watermark = "end of input"
    else:
        watermark = _dt.datetime.fromtimestamp(stats.watermark_ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    ticked = tick and not stats.rows_in and watermark != "end of input"
    note = " (no input: the per-partition watermark's tick, which fires the windows it passed)" if ticked else ""
    return (f"eventtime[{pipeline}] batch {stats.batch_id}: {stats.rows_in:,} rows, {stats.panes:,} panes, "
            f"{stats.late:,} late, {stats.invalid:,} invalid, watermark {watermark} ({seconds:.1f} s){note}")
