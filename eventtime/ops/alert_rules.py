"""The alert rules: which records, partitions and failures make an alert, and its text.

Pure functions over one batch's record table (pyarrow) and statistics; :class:`~eventtime.ops.alerts.Alerter`
applies the thresholds' outcome through the cooldown (cooldown.py) to the Sentry client
(sentry.py). Each returns the event's ``data`` (Sentry context ``eventtime``) and message.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..core.kinds import LATE_RECORD, RECORD_KINDS
from ..core.timestamps import ENRICHMENT_FAILED, MALFORMED_RECORD, TOO_LATE
from ..core._duration import human_ms
from ..core.kinds import ENRICHMENT_FAILURE_REASONS
from ..core.watermark import PER_PARTITION
from .failures import describe_failure
from .monitor import LAG, BatchStats, PartitionFinding

__all__ = ["failure_class", "record_alert", "skew_alert", "watermark_alerts", "failure_alert", "record_groups",
           "enrichment_alerts"]

SAMPLE_FIELDS = (
    "kind", "reason", "key", "event_time", "raw_timestamp", "watermark", "lateness_ms",
    "window_start", "window_end", "partition", "offset", "payload",
)
PAYLOAD_MAX_CHARS = 512
RAW_LINE_MAX_CHARS = 200


def failure_class(error: BaseException | str) -> tuple[str, str]:
    """(innermost error class, one-line summary) of a failure.

    A query's failure (a ``QueryFailedError``, PySpark's ``StreamingQueryException`` or the
    listener's text) is reduced by :func:`eventtime.ops.failures.describe_failure` to the Spark error
    class or the Python exception raised in a sink; any other exception is its own type.
    """
    error_class = getattr(error, "error_class", None)
    if isinstance(error_class, str) and error_class:
        return error_class, str(error)
    from_spark = isinstance(error, str) or type(error).__module__.split(".")[0] in ("pyspark", "py4j")
    if from_spark:
        described = describe_failure(error)
        if described.error_class:
            return described.error_class, str(described)
    name = "error" if isinstance(error, str) else type(error).__name__
    return name, str(error)


def _json_value(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    return v


def record_groups(records: Any) -> list[tuple[str, str, Any]]:
    """The batch's records grouped as ``(kind, reason, rows)``: ``late`` then ``invalid``,
    reasons in order. A table without ``kind`` (older callers) is split by ``too_late``."""
    import pyarrow.compute as pc

    groups: list[tuple[str, str, Any]] = []
    if records is None or not records.num_rows or "reason" not in records.column_names:
        return groups
    kinds = records.column("kind") if "kind" in records.column_names else None
    for kind in RECORD_KINDS:
        if kinds is not None:
            sub = records.filter(pc.equal(kinds, kind))
        else:
            mask = pc.equal(records.column("reason"), TOO_LATE)
            sub = records.filter(mask if kind == LATE_RECORD else pc.invert(mask))
        if sub.num_rows == 0:
            continue
        vc = pc.value_counts(sub.column("reason").combine_chunks())
        for reason in sorted((str(v) for v in vc.field("values").to_pylist())):
            groups.append((kind, reason, sub.filter(pc.equal(sub.column("reason"), reason))))
    return groups


def _samples(table: Any, max_samples: int) -> list[dict[str, Any]]:
    cols = [c for c in SAMPLE_FIELDS if c in table.column_names]
    out = []
    for row in table.slice(0, max_samples).select(cols).to_pylist():
        item = {k: _json_value(v) for k, v in row.items()}
        if isinstance(item.get("payload"), str) and len(item["payload"]) > PAYLOAD_MAX_CHARS:
            item["payload"] = item["payload"][:PAYLOAD_MAX_CHARS] + "..."
        out.append(item)
    return out


def _raw_lines(group: Any, max_samples: int) -> list[str]:
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
            lines.append(line if len(line) <= RAW_LINE_MAX_CHARS else line[:RAW_LINE_MAX_CHARS] + "...")
        if len(lines) >= max(max_samples, 1):
            break
    return lines


def record_alert(pipeline: str, batch_id: int, kind: str, reason: str, group: Any, rows_in: int,
                 threshold_count: int, threshold_share: float, max_samples: int,
                 totals: Mapping[str, Any] | None = None) -> tuple[dict, str] | None:
    """The alert of ``group`` (the batch's records of one kind and reason), or None below the
    thresholds: at least ``threshold_count`` records and ``threshold_share`` of the rows in.
    ``totals`` (``BatchStats.records_by_reason``): the batch's count, partitions and largest
    lateness when ``group`` is a sample of its records (written by Spark's tasks); the raw
    values and lines are then those of the sample."""
    import pyarrow.compute as pc

    count = group.num_rows if totals is None else int(totals["count"])
    denominator = max(rows_in, count)
    share = count / denominator if denominator else 1.0
    if count < threshold_count or share < threshold_share:
        return None
    partitions: list[str] = []
    if totals is not None:
        partitions = sorted(str(p) for p in totals["partitions"])
    elif "partition" in group.column_names:
        partitions = sorted(str(p) for p in pc.unique(group.column("partition")).to_pylist() if p is not None)
    data: dict[str, Any] = {
        "pipeline": pipeline,
        "batch_id": batch_id,
        "kind": kind,
        "reason": reason,
        "count": count,
        "rows_in": rows_in,
        "share": round(share, 6),
        "partitions": partitions,
        "samples": _samples(group, max_samples),
    }
    if kind == LATE_RECORD:
        if totals is not None:
            max_lat = totals["max_lateness_ms"]
        else:
            max_lat = pc.max(group.column("lateness_ms")).as_py() if "lateness_ms" in group.column_names else None
        data["max_lateness_ms"] = max_lat
        message = (
            f"[{pipeline}] {count} late record(s) in batch {batch_id}, too late for all their windows "
            f"({share:.1%} of {rows_in} rows), max lateness {'-' if max_lat is None else human_ms(max_lat)}, "
            f"partitions {', '.join(partitions) or '-'}"
        )
        return data, message
    raw: list[Any] = []
    if "raw_timestamp" in group.column_names:
        vc = pc.value_counts(group.column("raw_timestamp").combine_chunks())
        pairs = sorted(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()),
                       key=lambda p: (-p[1], str(p[0])))
        raw = [{"raw_timestamp": v, "count": c} for v, c in pairs[: max(max_samples, 1)]]
    if reason == MALFORMED_RECORD:
        # Not a timestamp problem: the source could not parse the row at all.
        lines = _raw_lines(group, max_samples)
        data["raw_lines"] = lines
        message = (
            f"[{pipeline}] {count} malformed record(s) (the source could not parse the row) quarantined "
            f"in batch {batch_id} ({share:.1%} of {rows_in} rows); raw lines: "
            f"{', '.join(repr(line) for line in lines) or '-'}"
        )
    elif reason == ENRICHMENT_FAILED:
        # Not a timestamp problem either: the record's lookup failed (its payload has the error column).
        message = (
            f"[{pipeline}] {count} record(s) whose async enrichment failed (after the retries) quarantined in "
            f"batch {batch_id} ({share:.1%} of {rows_in} rows)"
        )
    else:
        data["raw_values"] = raw
        shown = ", ".join(repr(r["raw_timestamp"]) for r in raw) or "-"
        message = (
            f"[{pipeline}] {count} record(s) with bogus timestamps ({reason}) quarantined in "
            f"batch {batch_id} ({share:.1%} of {rows_in} rows); raw values: {shown}"
        )
    return data, message


def skew_alert(pipeline: str, batch_id: int, finding: PartitionFinding, stats: BatchStats) -> tuple[str, dict, str]:
    """(kind ``partition_lag`` or ``partition_idle``, data, message) of a monitor finding."""
    kind = "partition_lag" if finding.kind == LAG else "partition_idle"
    data = {
        "pipeline": pipeline,
        "batch_id": batch_id,
        "partition": finding.partition,
        "lag_ms": finding.lag_ms,
        "idle_s": None if finding.idle_s is None else round(finding.idle_s, 3),
        "threshold_ms": finding.threshold_ms,
        "max_event_time_ms": finding.max_event_time_ms,
        "global_max_event_time_ms": finding.global_max_event_time_ms,
        "watermark_ms": stats.watermark_ms,
    }
    message = f"[{pipeline}] {finding.describe()} (batch {batch_id})"
    if finding.kind == LAG:
        data["watermark_mode"] = stats.watermark_mode
        message += "; " + lag_cost(stats.watermark_mode, finding.lag_ms)
    return kind, data, message


def lag_cost(watermark_mode: str, lag_ms: int) -> str:
    """What a partition's lag costs under each way the watermark moves.

    >>> lag_cost("per_partition", 5_400_000)
    'per-partition watermarks: its records are not late for it, the watermark waits for it, so every window fires about 1 h 30 min later (unless it goes idle)'
    """
    if watermark_mode == PER_PARTITION:
        return (f"per-partition watermarks: its records are not late for it, the watermark waits for it, so every "
                f"window fires about {human_ms(lag_ms)} later (unless it goes idle)")
    return ("the global watermark follows the fastest partitions: its records whose windows end more than the allowed "
            "lateness behind the watermark are late (watermark='per_partition' waits for it instead)")


def watermark_alerts(pipeline: str, batch_id: int, stats: BatchStats,
                     holdback_threshold_ms: int | None) -> list[tuple[str, str, dict, str]]:
    """Per-partition watermarks: ``(kind, partition or "", data, message)`` for each partition
    that became idle (``watermark_idle``) or active again (``watermark_active``) in this
    batch, and for a hold-back above ``holdback_threshold_ms`` (``watermark_holdback``)."""
    base = {"pipeline": pipeline, "batch_id": batch_id, "watermark_ms": stats.watermark_ms,
            "idle_partitions": list(stats.idle_partitions), "holdback_ms": stats.holdback_ms}
    alerts = []
    for partition in stats.became_idle:
        alerts.append(("watermark_idle", partition, {**base, "partition": partition},
                       f"[{pipeline}] partition {partition} is idle: the watermark no longer waits for it "
                       f"(batch {batch_id}); idle now: {', '.join(stats.idle_partitions)}"))
    for partition in stats.became_active:
        alerts.append(("watermark_active", partition, {**base, "partition": partition},
                       f"[{pipeline}] partition {partition} is active again: the watermark waits for it "
                       f"(batch {batch_id}); its records behind the watermark are late"))
    holdback = stats.holdback_ms
    if holdback_threshold_ms is not None and holdback is not None and holdback > holdback_threshold_ms:
        alerts.append(("watermark_holdback", "", {**base, "threshold_ms": holdback_threshold_ms},
                       f"[{pipeline}] the per-partition watermark is {human_ms(holdback)} behind the largest event time "
                       f"(threshold {human_ms(holdback_threshold_ms)}, batch {batch_id}): a slow partition holds every "
                       f"window back"))
    return alerts


def enrichment_alerts(pipeline: str, batch_id: int, stats: BatchStats, threshold_count: int,
                      threshold_share: float) -> list[tuple[str, dict, str]]:
    """``(output column, data, message)`` per enrichment step whose failed records in the batch
    reach the thresholds (kind ``enrichment_failed``). Steps with ``on_failure="invalid"`` are
    left out: their failed records are invalid records, alerted as such."""
    alerts = []
    for output, counts in sorted(stats.enrichment.items()):
        failed, rows = int(counts.get("failed", 0)), int(counts.get("rows", 0))
        share = failed / rows if rows else 1.0
        if counts.get("on_failure") == "invalid" or not failed or failed < threshold_count or share < threshold_share:
            continue
        reasons = {reason: int(counts[reason]) for reason in ENRICHMENT_FAILURE_REASONS if counts.get(reason)}
        data = {"pipeline": pipeline, "batch_id": batch_id, "output": output, "count": failed, "rows": rows,
                "share": round(share, 6), "reasons": reasons,
                **{name: counts.get(name) for name in ("requests", "retries", "cache_hits")}}
        shown = ", ".join(f"{reason} {n}" for reason, n in reasons.items())
        message = (f"[{pipeline}] async enrichment of {output!r} failed for {failed} of {rows} record(s) in batch "
                   f"{batch_id} ({shown}); they went on with a null {output!r}")
        alerts.append((output, data, message))
    return alerts


def rejected_alerts(pipeline: str, batch_id: int, stats: BatchStats, max_samples: int) -> list[tuple[str, dict, str]]:
    """``(sink target, data, message)`` per sink whose store refused rows of the batch (kind
    ``rows_rejected``): every refused row is a result that is not in the table."""
    alerts = []
    for target, rows in sorted(stats.rejected.items()):
        if not rows:
            continue
        samples = [{"row_index": index, "key": key, "error": error} for index, key, error in rows[:max_samples]]
        data = {"pipeline": pipeline, "batch_id": batch_id, "target": target, "count": len(rows), "samples": samples}
        first = rows[0]
        message = (f"[{pipeline}] {target} refused {len(rows)} row(s) of batch {batch_id}, e.g. row {first[0]}"
                   f"{'' if first[1] is None else f' (key {first[1]})'}: {first[2]}; the rest of the batch was written")
        alerts.append((target, data, message))
    return alerts


def failure_alert(pipeline: str, error: BaseException | str, checkpoint: str | None,
                  run_id: str | None) -> tuple[str, dict, str]:
    """(innermost error class, data, message) of a pipeline that stopped on ``error``."""
    error_type, summary = failure_class(error)
    text = summary.strip().splitlines()[0][:500] if summary.strip() else error_type
    if not text.startswith((error_type, f"[{error_type}]")):
        text = f"{error_type}: {text}"
    data = {"pipeline": pipeline, "error_type": error_type, "error": str(error)[:4000],
            "checkpoint": checkpoint, "run_id": run_id}
    return error_type, data, f"[{pipeline}] pipeline stopped: {text}"
