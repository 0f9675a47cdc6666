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
* **enrichment failures** (``eventtime.enrich_async`` with ``on_failure="null"``): one event
  per batch and output column whose failed lookups reach the late thresholds, with the counts
  per reason; fingerprint ``["eventtime", pipeline, "enrichment_failed", output]`` (with
  ``on_failure="invalid"`` they are invalid records, reason ``enrichment_failed``);
* **rows a sink refused** (a :class:`eventtime.sinks.BatchSink` such as ``PostgresSink``: a
  value the column type refuses): one error-level event per batch and sink with the row
  indexes, keys and errors; fingerprint ``["eventtime", pipeline, "rows_rejected", target]``
  (the rows are in the sink's rejects table; the rest of the batch was written);
* **partition skew**: a source partition whose max event time lags the global max by
  more than ``partition_lag_ms`` (default: the pipeline's max out-of-orderness, which
  :func:`eventtime.route` passes on: its records fall behind the watermark) or that sent nothing for
  ``idle_timeout_s``; fingerprint ``["eventtime", pipeline, "partition_lag"|"partition_idle", partition]``;
* **per-partition watermarks** (``watermark="per_partition"``): a partition that became idle
  or active again, and a hold-back (the largest event time minus W) above
  ``holdback_threshold_ms`` (default twice the max out-of-orderness); fingerprint
  ``["eventtime", pipeline, "watermark_idle"|"watermark_active", partition]`` and
  ``["eventtime", pipeline, "watermark_holdback", ""]``;
* **pipeline failed**: the query stopped on an error (:meth:`Alerter.on_failure`, which
  :func:`eventtime.route` calls itself); fingerprint ``["eventtime", pipeline,
  "pipeline_failed", innermost error class]``.

Every alert kind has a threshold and a cooldown per ``(pipeline, kind, reason or
partition)``: during a storm at most one event per cooldown is sent, and the counts
suppressed in between are carried into the next event (``suppressed_count``).

The rules (which records, partitions and failures make an alert, and its text) are in
``alert_rules.py``, the cooldown in ``cooldown.py``; alerts go to a dedicated
``sentry_sdk.Client`` with its own ``Scope`` (``sentry.py``: the global SDK setup of the
application is untouched, no integrations are installed). Without a
DSN (parameter or ``SENTRY_DSN``) alerts are only logged (logger ``eventtime.alerts``).
Sending never blocks the pipeline for longer than ``send_timeout_s`` per batch and
never raises: failures are logged.

Example:
    >>> import pyarrow as pa
    >>> from eventtime.ops.monitor import BatchStats
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

from .alert_rules import (
    enrichment_alerts,
    failure_alert,
    record_alert,
    record_groups,
    rejected_alerts,
    skew_alert,
    watermark_alerts,
)
from .cooldown import Cooldowns
from .monitor import BatchStats, PartitionMonitor, optional_ms
from .sentry import SentryClient

__all__ = ["Alerter", "Alert", "BatchAlerts"]

# The logger keeps the name it had before the package had folders: logging set-ups name it.
log = logging.getLogger("eventtime.alerts")

# The same stop reported twice (route's own report and the caller's) is one failure: same
# checkpoint and error class within this many seconds, unless both name their query run.
_SAME_FAILURE_S = 60.0


@dataclasses.dataclass(frozen=True)
class Alert:
    """One alert raised for a batch.

    ``kind`` is ``"late"``, ``"invalid"``, ``"partition_lag"``, ``"partition_idle"`` or
    ``"enrichment_failed"`` (among others); ``reason`` the record reason, the partition or the
    enriched column; ``sent`` whether it went to Sentry
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
        holdback_threshold_ms: int | timedelta | str | None = None,
        max_samples: int = 5,
        send_timeout_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        dsn_name = "dsn"
        if dsn is None:
            dsn = os.environ.get("SENTRY_DSN") or None
            dsn_name = "the environment variable SENTRY_DSN"
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
        self.holdback_threshold_ms = optional_ms(holdback_threshold_ms, "holdback_threshold_ms")
        self._default_holdback_ms: int | None = None
        self.max_samples = max_samples
        self._clock = clock
        self.monitor = PartitionMonitor(
            lag_threshold_ms=self.partition_lag_ms,
            idle_timeout_ms=None if idle_s is None else int(idle_s * 1000),
            clock=clock,
        )
        self._cooldowns = Cooldowns(self.cooldown_s)
        self._failures: dict[tuple[str | None, str], tuple[str | None, float]] = {}
        self.dsn = dsn
        try:
            self._client = None if dsn is None else SentryClient(
                dsn, pipeline, environment, self.send_timeout_s, dict(client_options or {}))
        except ValueError as exc:
            if dsn_name == "dsn":
                raise
            raise ValueError(f"{dsn_name} is not a valid Sentry DSN ({dsn!r}): {str(exc).split(': ', 1)[-1]}; "
                             "set it to https://KEY@HOST/PROJECT, or unset it to log alerts only") from None

    @property
    def enabled(self) -> bool:
        """Whether alerts are sent to Sentry (a DSN is configured)."""
        return self._client is not None

    def close(self) -> None:
        """Flush (bounded by ``send_timeout_s``) and close the Sentry client."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> "Alerter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- public -------------------------------------------------------------

    def use_pipeline_defaults(self, max_out_of_orderness_ms: int | None) -> None:
        """Called by :func:`eventtime.route`: without an explicit ``partition_lag_ms`` a
        partition lags when it is more than the pipeline's max out-of-orderness behind."""
        self.monitor.default_lag_threshold_ms = max_out_of_orderness_ms
        # per-partition watermarks: W is B behind its slowest active partition anyway
        self._default_holdback_ms = None if max_out_of_orderness_ms is None else 2 * max_out_of_orderness_ms

    def on_batch(self, batch_id: int, records: Any, stats: BatchStats | None = None) -> BatchAlerts:
        """Evaluate one micro-batch and send/log its alerts. Never raises.

        ``records``: the router's late and invalid records (a ``pyarrow.Table``, may be ``None`` or
        empty; a sample when Spark's tasks wrote them: the counts are in ``stats.records_by_reason``)."""
        started = time.perf_counter()
        alerts: list[Alert] = []
        metrics: Mapping[str, Any] = {}
        error = None
        try:
            alerts, metrics = self._evaluate(batch_id, records, stats)
            if self._client is not None and any(a.sent for a in alerts):
                remaining = max(0.0, self.send_timeout_s - (time.perf_counter() - started))
                self._client.flush(remaining)
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
            error_type, data, message = failure_alert(self.pipeline, error, checkpoint, run_id)
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
            alert = self._emit("pipeline_failed", error_type, 1, message, data, now, level="error")
            if self._client is not None and alert.sent:
                self._client.flush(self.send_timeout_s - (time.perf_counter() - started))
            return alert
        except Exception:  # noqa: BLE001 - alerting must never hide the original failure
            log.warning("eventtime: could not report the failure of pipeline %s", self.pipeline, exc_info=True)
            return None

    # -- evaluation ---------------------------------------------------------

    def _evaluate(self, batch_id: int, records: Any, stats: BatchStats | None) -> tuple[list[Alert], Mapping[str, Any]]:
        import pyarrow as pa

        if records is not None and not isinstance(records, pa.Table):
            raise TypeError(f"records must be a pyarrow.Table or None, got {type(records).__name__}")
        if stats is not None and not isinstance(stats, BatchStats):
            raise TypeError(f"stats must be a BatchStats or None, got {type(stats).__name__}")
        now = self._clock()
        alerts: list[Alert] = []
        rows_in = stats.rows_in if stats is not None else (0 if records is None else records.num_rows)
        by_reason = stats.records_by_reason if stats is not None else {}
        for kind, reason, group in record_groups(records):
            totals = by_reason.get(f"{kind}/{reason}")
            found = record_alert(self.pipeline, batch_id, kind, reason, group, rows_in, self.late_threshold_count,
                                 self.late_threshold_share, self.max_samples, totals)
            if found is None:
                log.debug("eventtime: %d %s records (%s) in batch %s below the alert threshold",
                          group.num_rows, kind, reason, batch_id)
                continue
            data, message = found
            alerts.append(self._emit(kind, reason, data["count"], message, data, now, level="warning"))
        metrics: Mapping[str, Any] = {}
        if stats is not None:
            findings = self.monitor.observe(stats)
            metrics = self.monitor.metrics()
            log.info("eventtime: pipeline %s batch %s partition metrics %s",
                     self.pipeline, batch_id, json.dumps(metrics, default=str, sort_keys=True))
            for finding in findings:
                kind, data, message = skew_alert(self.pipeline, batch_id, finding, stats)
                alerts.append(self._emit(kind, finding.partition, 1, message, data, now, level="warning"))
            threshold = self.holdback_threshold_ms if self.holdback_threshold_ms is not None else self._default_holdback_ms
            for kind, reason, data, message in watermark_alerts(self.pipeline, batch_id, stats, threshold):
                alerts.append(self._emit(kind, reason, 1, message, data, now,
                                         level="info" if kind == "watermark_active" else "warning"))
            for output, data, message in enrichment_alerts(self.pipeline, batch_id, stats, self.late_threshold_count,
                                                           self.late_threshold_share):
                alerts.append(self._emit("enrichment_failed", output, data["count"], message, data, now, level="warning"))
            for target, data, message in rejected_alerts(self.pipeline, batch_id, stats, self.max_samples):
                alerts.append(self._emit("rows_rejected", target, data["count"], message, data, now, level="error"))
        return alerts, metrics

    def _emit(self, kind: str, reason: str, count: int, message: str, data: dict[str, Any],
              now: float, level: str) -> Alert:
        fingerprint = ("eventtime", self.pipeline, kind, reason)
        send, carried, carried_batches = self._cooldowns.admit(kind, reason, count, now)
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
            event_id = self._client.capture(event)
        return Alert(kind, reason, count, message, fingerprint, sent=event_id is not None,
                     suppressed=False, suppressed_count=carried, event_id=event_id, data=data)
