"""Sentry alerts for late data, bogus timestamps and partition skew.

:class:`Alerter` is called by the router once per micro-batch
(``alerter.on_batch(batch_id, records, stats)``) and sends *aggregated* events:

* **late data**: one event per batch and reason (never one per record) with the
  count, the share of the batch (``late / rows_in``), the max lateness, the affected
  partitions and a few sample records; fingerprint
  ``["eventtime", pipeline, "late", reason]``;
* **bogus timestamps**: invalid records per reason with samples of the raw values
  (``0``, ``1970-...``, far future); fingerprint ``["eventtime", pipeline, "invalid", reason]``;
* **malformed records** (reason ``malformed_record``: the source could not parse the row, a
  timestamp was never read): their own wording, samples of the raw lines; fingerprint
  ``["eventtime", pipeline, "invalid", "malformed_record"]``;
* **partition skew**: a source partition whose max event time lags the global max by
  more than ``partition_lag_ms`` (default: the pipeline's max out-of-orderness, which
  :func:`eventtime.route` passes on: its records fall behind the watermark) or that sent nothing for
  ``idle_timeout_s``; fingerprint ``["eventtime", pipeline, "partition_lag"|"partition_idle", partition]``;
* **pipeline failed**: the query stopped on an error (:meth:`Alerter.on_failure`, which
  :func:`eventtime.route` calls itself); fingerprint ``["eventtime", pipeline,
  "pipeline_failed", innermost error class]``.

Every alert kind has a threshold and a cooldown per ``(pipeline, kind, reason or
partition)``: during a storm at most one event per cooldown is sent, and the counts
suppressed in between are carried into the next event (``suppressed_count``).

Alerts go to a dedicated ``sentry_sdk.Client`` with its own ``Scope`` (the global
SDK setup of the application is untouched, no integrations are installed). Without a
DSN (parameter or ``SENTRY_DSN``) alerts are only logged (logger ``eventtime.alerts``).
Sending never blocks the pipeline for longer than ``send_timeout_s`` per batch and
never raises: failures are logged.

Example:
    >>> import pyarrow as pa
    >>> from eventtime.monitor import BatchStats
    >>> alerter = Alerter(dsn=None, pipeline="clicks")        # log only
    >>> records = pa.table({"kind": ["late"], "reason": ["too_late"], "lateness_ms": [90_000],
    ...                     "partition": ["3"]})
    >>> out = alerter.on_batch(0, records, BatchStats(0, 10, 1, 1, 0, None, {}))
    >>> [(a.kind, a.reason, a.count, a.sent) for a in out.alerts]
    [('late', 'too_late', 1, False)]
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from datetime import timedelta
from typing import Any, Callable, Mapping

from eventtime.monitor import BatchStats, PartitionFinding, PartitionMonitor, optional_ms
from eventtime.timestamps import MALFORMED_RECORD

__all__ = ["Alerter", "Alert", "BatchAlerts"]

log = logging.getLogger("eventtime.alerts")

_SAMPLE_FIELDS = (
    "kind", "reason", "key", "event_time", "raw_timestamp", "watermark", "lateness_ms",
    "window_start", "window_end", "partition", "offset", "payload",
)
_PAYLOAD_MAX_CHARS = 512
_RAW_LINE_MAX_CHARS = 200
# The same stop reported twice (route's own report and the caller's) is one failure: same
# checkpoint and error class within this many seconds, unless both name their query run.
_SAME_FAILURE_S = 60.0


def _failure_class(error: BaseException | str) -> tuple[str, str]:
    """(innermost error class, one-line summary) of a failure.

    A query's failure (a ``QueryFailedError``, PySpark's ``StreamingQueryException`` or the
    listener's text) is reduced by :func:`eventtime.spark.describe_failure` to the Spark error
    class or the Python exception raised in a sink; any other exception is its own type.
    """
    error_class = getattr(error, "error_class", None)
    if isinstance(error_class, str) and error_class:
        return error_class, str(error)
    from_spark = isinstance(error, str) or type(error).__module__.split(".")[0] in ("pyspark", "py4j")
    if from_spark:
        try:
            from eventtime.spark.errors import describe_failure
        except ImportError:  # pragma: no cover - Spark not installed
            describe_failure = None
        if describe_failure is not None:
            described = describe_failure(error)
            if described.error_class:
                return described.error_class, str(described)
    name = "error" if isinstance(error, str) else type(error).__name__
    return name, str(error)


@dataclasses.dataclass(frozen=True)
class Alert:
    """One alert raised for a batch.

    ``kind`` is ``"late"``, ``"invalid"``, ``"partition_lag"`` or ``"partition_idle"``;
    ``reason`` the record reason or the partition; ``sent`` whether it went to Sentry
    (``False`` when there is no DSN); ``suppressed`` whether the cooldown held it back
    (its count is then carried into the next event); ``event_id`` the Sentry event id.
    """

    kind: str
    reason: str
    count: int
    message: str
    fingerprint: tuple[str, ...]
    sent: bool
    suppressed: bool
    suppressed_count: int = 0
    event_id: str | None = None
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class BatchAlerts:
    """What :meth:`Alerter.on_batch` did: the alerts, the partition metrics, the time spent."""

    batch_id: int
    alerts: tuple[Alert, ...]
    metrics: Mapping[str, Any]
    duration_s: float
    error: str | None = None


@dataclasses.dataclass
class _Cooldown:
    last_sent_s: float | None = None
    suppressed_count: int = 0
    suppressed_batches: int = 0


def _json_value(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    return v


def _seconds(name: str, value: object, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or a timedelta, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return float(value)


class Alerter:
    """Aggregated, rate-limited Sentry alerts for one pipeline.

    Args:
        dsn: Sentry DSN; default ``os.environ["SENTRY_DSN"]``; none: log only. A
            malformed DSN raises ``ValueError`` here, not mid-stream.
        pipeline: pipeline name (tag ``pipeline`` and part of every fingerprint).
        environment: Sentry environment (default: the SDK's, ``SENTRY_ENVIRONMENT``/production).
        late_threshold_count, late_threshold_share: a late (or invalid) alert needs at
            least this many records of a reason in the batch AND at least this share
            of the batch's input rows.
        cooldown_s: at most one event per ``(kind, reason/partition)`` per cooldown.
        partition_lag_ms: lag threshold (int ms or timedelta); ``None``: the pipeline's max
            out-of-orderness, set by :func:`eventtime.route` (without route: ``global max
            event time - watermark``).
        idle_timeout_s: a partition silent for longer is reported; ``None``: off.
        max_samples: sample records per event.
        send_timeout_s: the most one ``on_batch`` waits for Sentry.
        clock: seconds, monotonic (cooldowns, idleness); injectable for tests.
        client_options: extra ``sentry_sdk.Client`` options (``http_proxy``, ``release``...).

    Example:
        >>> Alerter(dsn="not a dsn")
        Traceback (most recent call last):
        ...
        ValueError: dsn is not a valid Sentry DSN ('not a dsn'): Unsupported scheme ''
    """

    def __init__(
        self,
        dsn: str | None = None,
        pipeline: str = "default",
        environment: str | None = None,
        late_threshold_count: int = 1,
        late_threshold_share: float = 0.0,
        cooldown_s: float | timedelta = 300,
        partition_lag_ms: int | timedelta | None = None,
        idle_timeout_s: float | timedelta | None = None,
        max_samples: int = 5,
        send_timeout_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        if dsn is None:
            dsn = os.environ.get("SENTRY_DSN") or None
        if dsn is not None and not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str or None, got {type(dsn).__name__}")
        if not isinstance(pipeline, str):
            raise TypeError(f"pipeline must be a str, got {type(pipeline).__name__}")
        if not pipeline.strip():
            raise ValueError(f"pipeline must be a non-empty string, got {pipeline!r}")
        if environment is not None and not isinstance(environment, str):
            raise TypeError(f"environment must be a str or None, got {type(environment).__name__}")
        if isinstance(late_threshold_count, bool) or not isinstance(late_threshold_count, int):
            raise TypeError(f"late_threshold_count must be an int, got {type(late_threshold_count).__name__}")
        if late_threshold_count < 1:
            raise ValueError(f"late_threshold_count must be >= 1, got {late_threshold_count}")
        if isinstance(late_threshold_share, bool) or not isinstance(late_threshold_share, (int, float)):
            raise TypeError(f"late_threshold_share must be a number, got {type(late_threshold_share).__name__}")
        if not 0.0 <= late_threshold_share <= 1.0:
            raise ValueError(f"late_threshold_share must be in [0, 1], got {late_threshold_share}")
        if isinstance(max_samples, bool) or not isinstance(max_samples, int):
            raise TypeError(f"max_samples must be an int, got {type(max_samples).__name__}")
        if max_samples < 0:
            raise ValueError(f"max_samples must be >= 0, got {max_samples}")
        if not callable(clock):
            raise TypeError(f"clock must be callable, got {type(clock).__name__}")
        if client_options is not None and not isinstance(client_options, Mapping):
            raise TypeError(f"client_options must be a mapping, got {type(client_options).__name__}")
        self.pipeline = pipeline
        self.environment = environment
        self.late_threshold_count = late_threshold_count
        self.late_threshold_share = float(late_threshold_share)
        self.cooldown_s = _seconds("cooldown_s", cooldown_s)
        self.send_timeout_s = _seconds("send_timeout_s", send_timeout_s)
        idle_s = _seconds("idle_timeout_s", idle_timeout_s, allow_none=True)
        self.idle_timeout_s = idle_s
        self.partition_lag_ms = optional_ms(partition_lag_ms, "partition_lag_ms")
        self.max_samples = max_samples
        self._clock = clock
        self.monitor = PartitionMonitor(
            lag_threshold_ms=self.partition_lag_ms,
            idle_timeout_ms=None if idle_s is None else int(idle_s * 1000),
            clock=clock,
        )
        self._cooldowns: dict[tuple[str, str], _Cooldown] = {}
        self._failures: dict[tuple[str | None, str], tuple[str | None, float]] = {}
        self._client: Any = None
        self._scope: Any = None
        self.dsn = dsn
        if dsn is not None:
            self._validate_dsn(dsn)
            self._client, self._scope = self._make_client(dsn, dict(client_options or {}))

    # -- Sentry plumbing ----------------------------------------------------

    @staticmethod
    def _validate_dsn(dsn: str) -> None:
        from sentry_sdk.utils import BadDsn, Dsn

        try:
            Dsn(dsn)
        except BadDsn as exc:
            raise ValueError(f"dsn is not a valid Sentry DSN ({dsn!r}): {exc}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a bad port
            raise ValueError(f"dsn is not a valid Sentry DSN ({dsn!r}): {exc}") from None

    def _make_client(self, dsn: str, extra: dict[str, Any]) -> tuple[Any, Any]:
        import sentry_sdk

        options: dict[str, Any] = {
            "dsn": dsn,
            "default_integrations": False,
            "auto_enabling_integrations": False,
            "integrations": [],
            "send_client_reports": False,
            "enable_backpressure_handling": False,
            "shutdown_timeout": self.send_timeout_s,
            "max_breadcrumbs": 0,
            "spotlight": False,
        }
        if self.environment is not None:
            options["environment"] = self.environment
        options.update(extra)
        try:
            client = sentry_sdk.Client(**options)
        except Exception as exc:  # noqa: BLE001 - configuration error, at start
            raise ValueError(f"dsn {dsn!r}: could not create the Sentry client: {exc}") from exc
        scope = sentry_sdk.Scope(client=client)
        scope.set_tag("pipeline", self.pipeline)
        scope.set_tag("eventtime.pipeline", self.pipeline)
        if self.environment is not None:
            scope.set_tag("environment", self.environment)
        return client, scope

    @property
    def enabled(self) -> bool:
        """Whether alerts are sent to Sentry (a DSN is configured)."""
        return self._client is not None

    def close(self) -> None:
        """Flush (bounded by ``send_timeout_s``) and close the Sentry client."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close(timeout=self.send_timeout_s)
            except Exception:  # noqa: BLE001
                log.warning("eventtime: closing the Sentry client failed", exc_info=True)

    def __enter__(self) -> "Alerter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- public -------------------------------------------------------------

    def use_pipeline_defaults(self, max_out_of_orderness_ms: int | None) -> None:
        """Called by :func:`eventtime.route`: without an explicit ``partition_lag_ms`` a
        partition lags when it is more than the pipeline's max out-of-orderness behind."""
        self.monitor.default_lag_threshold_ms = max_out_of_orderness_ms

    def partition_metrics(self) -> dict[str, dict[str, Any]]:
        """Per source partition: ``max_event_time_ms``, ``lag_ms``, ``idle_s``, ``rows_total``,
        ``rows_last_batch``, ``lagging``, ``idle`` (as of the last batch)."""
        return self.monitor.metrics()

    def on_batch(self, batch_id: int, records: Any, stats: BatchStats | None = None) -> BatchAlerts:
        """Evaluate one micro-batch and send/log its alerts. Never raises.

        ``records`` is the router's record table (late + invalid, a ``pyarrow.Table``,
        may be ``None`` or empty); ``stats`` the batch's :class:`BatchStats`.
        """
        started = time.perf_counter()
        alerts: list[Alert] = []
        metrics: Mapping[str, Any] = {}
        error = None
        try:
            alerts, metrics = self._evaluate(batch_id, records, stats)
            if self._client is not None and any(a.sent for a in alerts):
                remaining = max(0.0, self.send_timeout_s - (time.perf_counter() - started))
                self._client.flush(timeout=remaining)
        except Exception as exc:  # noqa: BLE001 - alerting must never fail the pipeline
            error = f"{type(exc).__name__}: {exc}"
            log.warning("eventtime: alerting failed for batch %s of pipeline %s: %s",
                        batch_id, self.pipeline, error, exc_info=True)
        return BatchAlerts(batch_id, tuple(alerts), metrics, time.perf_counter() - started, error)

    def on_failure(self, error: BaseException | str, checkpoint: str | None = None,
                   run_id: str | None = None) -> Alert | None:
        """Report that the pipeline stopped on an error (a failed query, unreadable state).

        One error-level event fingerprinted by pipeline and the innermost error class: for a
        query's failure (``query.exception()``, a ``QueryFailedError``, the listener's text) the
        Spark error class or the Python exception raised in a sink, otherwise the exception's
        type. Never raises. :func:`eventtime.route` calls it itself when its query stops on an
        error, with the query's ``run_id``; the same stop reported again (same checkpoint and
        error class within a minute, or the same run) is dropped and returns ``None``, so a
        caller that reports it too adds nothing. A later failure is reported again.

        >>> Alerter().on_failure(RuntimeError("state store"), checkpoint="/tmp/cp").kind
        'pipeline_failed'
        """
        started = time.perf_counter()
        try:
            error_type, summary = _failure_class(error)
            now = self._clock()
            previous = self._failures.get((checkpoint, error_type))
            if previous is not None:
                previous_run, reported_at = previous
                if run_id is not None and previous_run is not None:
                    same = run_id == previous_run
                else:
                    same = now - reported_at < _SAME_FAILURE_S
                if same:
                    log.info("eventtime: pipeline %s: failure %s already reported", self.pipeline, error_type)
                    return None
            self._failures[(checkpoint, error_type)] = (run_id, now)
            text = summary.strip().splitlines()[0][:500] if summary.strip() else error_type
            if not text.startswith((error_type, f"[{error_type}]")):
                text = f"{error_type}: {text}"
            data = {"pipeline": self.pipeline, "error_type": error_type, "error": str(error)[:4000],
                    "checkpoint": checkpoint, "run_id": run_id}
            message = f"[{self.pipeline}] pipeline stopped: {text}"
            alert = self._emit("pipeline_failed", error_type, 1, message, data, now, level="error")
            if self._client is not None and alert.sent:
                self._client.flush(timeout=max(0.0, self.send_timeout_s - (time.perf_counter() - started)))
            return alert
        except Exception:  # noqa: BLE001 - alerting must never hide the original failure
            log.warning("eventtime: could not report the failure of pipeline %s", self.pipeline, exc_info=True)
            return None

    # -- evaluation ---------------------------------------------------------

    def _evaluate(self, batch_id: int, records: Any, stats: BatchStats | None) -> tuple[list[Alert], Mapping[str, Any]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        if records is not None and not isinstance(records, pa.Table):
            raise TypeError(f"records must be a pyarrow.Table or None, got {type(records).__name__}")
        if stats is not None and not isinstance(stats, BatchStats):
            raise TypeError(f"stats must be a BatchStats or None, got {type(stats).__name__}")
        now = self._clock()
        alerts: list[Alert] = []
        n_records = 0 if records is None else records.num_rows
        rows_in = stats.rows_in if stats is not None else n_records
        if records is not None and n_records and "reason" in records.column_names:
            kinds = records.column("kind") if "kind" in records.column_names else None
            for kind in ("late", "invalid"):
                if kinds is not None:
                    sub = records.filter(pc.equal(kinds, kind))
                else:
                    reasons = records.column("reason")
                    mask = pc.equal(reasons, "too_late")
                    sub = records.filter(mask if kind == "late" else pc.invert(mask))
                if sub.num_rows == 0:
                    continue
                vc = pc.value_counts(sub.column("reason").combine_chunks())
                for reason, count in sorted(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()),
                                            key=lambda p: str(p[0])):
                    reason = str(reason)
                    group = sub.filter(pc.equal(sub.column("reason"), reason))
                    alert = self._record_alert(batch_id, kind, reason, group, rows_in, now)
                    if alert is not None:
                        alerts.append(alert)
        metrics: Mapping[str, Any] = {}
        if stats is not None:
            findings = self.monitor.observe(stats)
            metrics = self.monitor.metrics()
            log.info("eventtime: pipeline %s batch %s partition metrics %s",
                     self.pipeline, batch_id, json.dumps(metrics, default=str, sort_keys=True))
            for f in findings:
                alerts.append(self._skew_alert(batch_id, f, stats, now))
        return alerts, metrics

    def _gate(self, kind: str, reason: str, count: int, now: float) -> tuple[bool, int, int]:
        """Cooldown: returns (send, carried_count, carried_batches)."""
        cd = self._cooldowns.setdefault((kind, reason), _Cooldown())
        if cd.last_sent_s is None or now - cd.last_sent_s >= self.cooldown_s:
            carried, batches = cd.suppressed_count, cd.suppressed_batches
            cd.last_sent_s = now
            cd.suppressed_count = cd.suppressed_batches = 0
            return True, carried, batches
        cd.suppressed_count += count
        cd.suppressed_batches += 1
        return False, 0, 0

    def _samples(self, table: Any) -> list[dict[str, Any]]:
        cols = [c for c in _SAMPLE_FIELDS if c in table.column_names]
        out = []
        for row in table.slice(0, self.max_samples).select(cols).to_pylist():
            item = {k: _json_value(v) for k, v in row.items()}
            if isinstance(item.get("payload"), str) and len(item["payload"]) > _PAYLOAD_MAX_CHARS:
                item["payload"] = item["payload"][:_PAYLOAD_MAX_CHARS] + "..."
            out.append(item)
        return out

    def _raw_lines(self, group: Any) -> list[str]:
        """The source lines of malformed records (``payload._corrupt_record``), a few, shortened."""
        lines: list[str] = []
        if "payload" not in group.column_names:
            return lines
        for payload in group.column("payload").to_pylist():
            try:
                line = json.loads(payload).get("_corrupt_record") if payload else None
            except (ValueError, AttributeError):
                line = None
            if isinstance(line, str) and line not in lines:
                lines.append(line if len(line) <= _RAW_LINE_MAX_CHARS else line[:_RAW_LINE_MAX_CHARS] + "...")
            if len(lines) >= max(self.max_samples, 1):
                break
        return lines

    def _record_alert(self, batch_id: int, kind: str, reason: str, group: Any, rows_in: int, now: float) -> Alert | None:
        import pyarrow.compute as pc

        count = group.num_rows
        denominator = max(rows_in, count)
        share = count / denominator if denominator else 1.0
        if count < self.late_threshold_count or share < self.late_threshold_share:
            log.debug("eventtime: %d %s records (%s) in batch %s below the alert threshold",
                      count, kind, reason, batch_id)
            return None
        partitions: list[str] = []
        if "partition" in group.column_names:
            partitions = sorted(str(p) for p in pc.unique(group.column("partition")).to_pylist() if p is not None)
        data: dict[str, Any] = {
            "pipeline": self.pipeline,
            "batch_id": batch_id,
            "kind": kind,
            "reason": reason,
            "count": count,
            "rows_in": rows_in,
            "share": round(share, 6),
            "partitions": partitions,
            "samples": self._samples(group),
        }
        if kind == "late":
            max_lat = pc.max(group.column("lateness_ms")).as_py() if "lateness_ms" in group.column_names else None
            data["max_lateness_ms"] = max_lat
            message = (
                f"[{self.pipeline}] {count} late record(s) in batch {batch_id}, too late for all their windows "
                f"({share:.1%} of {rows_in} rows), max lateness {max_lat} ms, "
                f"partitions {', '.join(partitions) or '-'}"
            )
        else:
            raw: list[Any] = []
            if "raw_timestamp" in group.column_names:
                vc = pc.value_counts(group.column("raw_timestamp").combine_chunks())
                pairs = sorted(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()),
                               key=lambda p: (-p[1], str(p[0])))
                raw = [{"raw_timestamp": v, "count": c} for v, c in pairs[: max(self.max_samples, 1)]]
            shown = ", ".join(repr(r["raw_timestamp"]) for r in raw) or "-"
            if reason == MALFORMED_RECORD:
                # Not a timestamp problem: the source could not parse the row at all.
                lines = self._raw_lines(group)
                data["raw_lines"] = lines
                message = (
                    f"[{self.pipeline}] {count} malformed record(s) (the source could not parse the row) quarantined "
                    f"in batch {batch_id} ({share:.1%} of {rows_in} rows); raw lines: "
                    f"{', '.join(repr(line) for line in lines) or '-'}"
                )
            else:
                data["raw_values"] = raw
                message = (
                    f"[{self.pipeline}] {count} record(s) with bogus timestamps ({reason}) quarantined in "
                    f"batch {batch_id} ({share:.1%} of {rows_in} rows); raw values: {shown}"
                )
        return self._emit(kind, reason, count, message, data, now, level="warning")

    def _skew_alert(self, batch_id: int, f: PartitionFinding, stats: BatchStats, now: float) -> Alert:
        kind = "partition_lag" if f.kind == "lag" else "partition_idle"
        data = {
            "pipeline": self.pipeline,
            "batch_id": batch_id,
            "partition": f.partition,
            "lag_ms": f.lag_ms,
            "idle_s": None if f.idle_s is None else round(f.idle_s, 3),
            "threshold_ms": f.threshold_ms,
            "max_event_time_ms": f.max_event_time_ms,
            "global_max_event_time_ms": f.global_max_event_time_ms,
            "watermark_ms": stats.watermark_ms,
        }
        message = f"[{self.pipeline}] {f.describe()} (batch {batch_id})"
        if f.kind == "lag":
            message += "; its records will be classified late"
        return self._emit(kind, f.partition, 1, message, data, now, level="warning")

    def _emit(self, kind: str, reason: str, count: int, message: str, data: dict[str, Any],
              now: float, level: str) -> Alert:
        fingerprint = ("eventtime", self.pipeline, kind, reason)
        send, carried, carried_batches = self._gate(kind, reason, count, now)
        if not send:
            log.info("eventtime: alert suppressed by cooldown: %s", message)
            return Alert(kind, reason, count, message, fingerprint, sent=False, suppressed=True, data=data)
        if carried:
            data["suppressed_count"] = carried
            data["suppressed_batches"] = carried_batches
            message += f" (+{carried} in {carried_batches} earlier batch(es) suppressed by the cooldown)"
        log.warning("eventtime alert: %s", message)
        event_id = None
        if self._client is not None:
            event = {
                "level": level,
                "logger": "eventtime.alerts",
                "message": message,
                "fingerprint": list(fingerprint),
                "tags": {
                    "eventtime.alert": kind,
                    "eventtime.reason": reason,
                },
                # contexts, not extra: sentry-sdk trims "extra" databags to 10 keys per level
                "contexts": {"eventtime": data},
            }
            event_id = self._client.capture_event(event, scope=self._scope)
        return Alert(kind, reason, count, message, fingerprint, sent=event_id is not None,
                     suppressed=False, suppressed_count=carried, event_id=event_id, data=data)
