"""Reading and querying the late-data table written by :class:`eventtime.sinks.DeltaLateSink`.

Filters (all optional, combined with AND):

* ``since`` / ``until``: a time range ``[since, until)`` on ``time_column``
  (``"event_time"``, the default, or ``"detected_at"``); ``datetime`` (naive = UTC),
  ISO-8601 string or int epoch ms. Invalid records have no event time, so an
  ``event_time`` range excludes them.
* ``reason`` / ``kind``: one value or a list.
* ``partition``: the source partition (string), one value or a list.
* ``key``: a JSON object (``'{"user":"a"}'``, matched as an object), ``col=value``
  (key column ``col`` equals ``value`` as text) or a bare ``value`` (any key column).
* ``pipeline``.

Example:
    >>> import datetime as dt
    >>> df = read_late_pandas("/data/late", reason="too_late",
    ...                       since=dt.datetime(2024, 1, 1))          # doctest: +SKIP
    >>> summary = summarize(read_late("/data/late"))                   # doctest: +SKIP
    >>> summary["by_reason"]                                           # doctest: +SKIP
    {'too_late': 12, 'null_timestamp': 1}

The Spark reader, :func:`read_late_spark`, reads exactly the Parquet files of the
current Delta snapshot (``DeltaTable.file_uris()``), so it needs no delta-spark.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..sinks.schema import TS
from ..sinks.tables import latest_panes, snapshot_dataset

__all__ = [
    "LateTableNotFoundError",
    "NotALateTableError",
    "LATE_COLUMNS",
    "LateFilter",
    "parse_instant",
    "open_late_table",
    "read_late",
    "read_late_pandas",
    "read_late_spark",
    "summarize",
    "latest_panes",
]

TIME_COLUMNS = ("event_time", "detected_at")


class LateTableNotFoundError(FileNotFoundError):
    """No Delta table at the given path."""


class NotALateTableError(ValueError):
    """The Delta table at the path is not a late-data table (e.g. the results table)."""


#: The columns that make a Delta table a late-data table (:class:`~eventtime.sinks.DeltaLateSink`).
LATE_COLUMNS = ("kind", "reason", "key", "event_time", "payload")


def parse_instant(name: str, value: object) -> _dt.datetime | None:
    """Parse a time bound: ``datetime`` (naive = UTC), ISO-8601 string or int epoch ms.

    Raises ``TypeError``/``ValueError`` naming ``name``.

    >>> parse_instant("since", "2024-01-01T00:00:00Z")
    datetime.datetime(2024, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
    >>> parse_instant("since", 0)
    datetime.datetime(1970, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a datetime, ISO-8601 string or int epoch ms, got bool")
    if isinstance(value, _dt.datetime):
        out = value
    elif isinstance(value, _dt.date):
        out = _dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, int):
        out = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            out = _dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValueError(
                f"{name} must be an ISO-8601 time like 2024-01-31T12:00:00Z, got {value!r}"
            ) from None
    else:
        raise TypeError(
            f"{name} must be a datetime, ISO-8601 string or int epoch ms, got {type(value).__name__}"
        )
    if out.tzinfo is None:
        out = out.replace(tzinfo=_dt.timezone.utc)
    return out.astimezone(_dt.timezone.utc)


def _as_list(name: str, value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        items = list(value)
        if not all(isinstance(v, str) for v in items):
            raise TypeError(f"{name} must be a string or a list of strings, got {items!r}")
        return items
    raise TypeError(f"{name} must be a string or a list of strings, got {type(value).__name__}")


class LateFilter:
    """A validated set of filters for the late table (see the module docstring).

    >>> f = LateFilter(reason="too_late", since="2024-01-01", time_column="detected_at")
    >>> f.reasons, f.since.year
    (['too_late'], 2024)
    """

    def __init__(
        self,
        since: object = None,
        until: object = None,
        time_column: str = "event_time",
        reason: str | Sequence[str] | None = None,
        kind: str | Sequence[str] | None = None,
        partition: str | int | Sequence[str | int] | None = None,
        key: str | None = None,
        pipeline: str | None = None,
    ) -> None:
        if time_column not in TIME_COLUMNS:
            raise ValueError(f"time_column must be one of {TIME_COLUMNS}, got {time_column!r}")
        self.time_column = time_column
        self.since = parse_instant("since", since)
        self.until = parse_instant("until", until)
        if self.since and self.until and self.since >= self.until:
            raise ValueError(f"since ({self.since.isoformat()}) must be before until ({self.until.isoformat()})")
        self.reasons = _as_list("reason", reason)
        from ..core.timestamps import INVALID_REASONS, PARTLY_LATE, TOO_LATE

        unknown = [r for r in self.reasons or () if r not in (TOO_LATE, PARTLY_LATE, *INVALID_REASONS)]
        if unknown:
            raise ValueError(f"reason {unknown[0]!r} is not a reason eventtime writes; valid: {', '.join((TOO_LATE, PARTLY_LATE, *INVALID_REASONS))}")
        self.kinds = _as_list("kind", kind)
        # a source partition is written as text (Kafka's and a file source's INT column alike):
        # an int filter means the same partition
        if isinstance(partition, int) and not isinstance(partition, bool):
            partition = str(partition)
        elif isinstance(partition, (list, tuple)):
            partition = [str(p) if isinstance(p, int) and not isinstance(p, bool) else p for p in partition]
        self.partitions = _as_list("partition", partition)
        if key is not None and not isinstance(key, str):
            raise TypeError(f"key must be a string, got {type(key).__name__}")
        self.key = key
        self._key_obj: dict | None = None
        if key is not None and key.lstrip().startswith("{"):
            try:
                obj = json.loads(key)
            except ValueError:
                raise ValueError(f"key looks like JSON but does not parse: {key!r}") from None
            if not isinstance(obj, dict):
                raise ValueError(f"key must be a JSON object, col=value or a value, got {key!r}")
            self._key_obj = obj
        if pipeline is not None and not isinstance(pipeline, str):
            raise TypeError(f"pipeline must be a string, got {type(pipeline).__name__}")
        self.pipeline = pipeline

    def conditions(self, columns: Sequence[str]) -> list[tuple[str, str, Any]]:
        """Everything but ``key`` as ``(column, operator, value)`` triples (operator one of
        ``>=``, ``<``, ``<=``, ``in``, ``==``), for a table with these ``columns``: the one
        statement of the filters, rendered for pyarrow by :meth:`expression` and for Spark by
        :func:`read_late_spark`. With ``time_column="detected_at"`` the ``detected_date``
        partition column is bounded too, so whole partitions are skipped."""
        out: list[tuple[str, str, Any]] = []
        by_date = self.time_column == "detected_at" and "detected_date" in columns
        if self.since is not None:
            out.append((self.time_column, ">=", self.since))
            if by_date:
                out.append(("detected_date", ">=", self.since.date()))
        if self.until is not None:
            out.append((self.time_column, "<", self.until))
            if by_date:
                out.append(("detected_date", "<=", self.until.date()))
        for column, values in (("reason", self.reasons), ("kind", self.kinds), ("partition", self.partitions)):
            if values is not None:
                out.append((column, "in", values))
        if self.pipeline is not None:
            out.append(("pipeline", "==", self.pipeline))
        return out

    def expression(self, schema: pa.Schema) -> ds.Expression | None:
        """A pyarrow dataset expression for everything but ``key`` (``None``: no filter)."""
        def scalar(value: Any) -> Any:
            if isinstance(value, _dt.datetime):
                return pa.scalar(value, TS)
            if isinstance(value, _dt.date):
                return pa.scalar(value, pa.date32())
            return value

        return _combine([_render(ds.field(column), op, scalar(value)) for column, op, value in self.conditions(schema.names)])

    def matching_keys(self, keys: Iterable[str | None]) -> list[str]:
        """Which distinct ``key`` JSON strings match the ``key`` filter."""
        out = []
        for k in keys:
            if k is None:
                continue
            if k == self.key:
                out.append(k)
                continue
            try:
                obj = json.loads(k)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            if self._key_obj is not None:
                if obj == self._key_obj:
                    out.append(k)
            elif self.key is not None and "=" in self.key:
                col, _, val = self.key.partition("=")
                if col in obj and _text(obj[col]) == val:
                    out.append(k)
            elif self.key is not None and any(_text(v) == self.key for v in obj.values()):
                out.append(k)
        return out


def _render(column: Any, op: str, value: Any) -> Any:
    """One condition of :meth:`LateFilter.conditions` on a pyarrow field or a Spark column."""
    if op == ">=":
        return column >= value
    if op == "<":
        return column < value
    if op == "<=":
        return column <= value
    if op == "in":
        return column.isin(value)
    return column == value


def _combine(parts: list) -> Any:
    if not parts:
        return None
    expr = parts[0]
    for part in parts[1:]:
        expr = expr & part
    return expr


def _text(v: object) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, default=str)


def open_late_table(path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> Any:
    """Open the late-data Delta table at ``path``.

    Raises :class:`LateTableNotFoundError` when there is no Delta table, and
    :class:`NotALateTableError` (a ``ValueError``) when the table lacks the late-data columns
    (:data:`LATE_COLUMNS`): reading the results table by mistake is an error, not an empty answer.

    Example:
        ``open_late_table("/data/results")`` raises ``NotALateTableError: '/data/results' is
        not a late-data table (it looks like a results table: ...)``
    """
    from deltalake import DeltaTable

    path = os.fspath(path)
    opts = dict(storage_options) if storage_options else None
    if not DeltaTable.is_deltatable(path, opts):
        raise LateTableNotFoundError(f"no Delta table at {path!r}")
    dt = DeltaTable(path, storage_options=opts)
    columns = {field.name for field in dt.schema().fields}
    missing = [c for c in LATE_COLUMNS if c not in columns]
    if missing:
        hint = " (it looks like a results table: DeltaResultsSink writes panes)" if "pane_timing" in columns else ""
        raise NotALateTableError(
            f"{path!r} is not a late-data table{hint}: it has no column(s) {', '.join(missing)}; "
            "give the table written by DeltaLateSink"
        )
    return dt


def _filter(kwargs: Mapping[str, Any]) -> LateFilter:
    return LateFilter(**kwargs)


def read_late(
    path: str | os.PathLike[str],
    *,
    columns: Sequence[str] | None = None,
    limit: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    **filters: Any,
) -> pa.Table:
    """Read the late table as a ``pyarrow.Table``, filtered (see :class:`LateFilter`),
    ordered by ``detected_at`` then ``batch_id``; ``limit`` keeps the first rows.

    Example:
        ``read_late("/data/late", reason=["too_late"], partition="3", limit=100)``
    """
    flt = _filter(filters)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    dt = open_late_table(path, storage_options)
    dataset = snapshot_dataset(dt)
    expr = flt.expression(dataset.schema)
    table = dataset.to_table(filter=expr)
    if flt.key is not None and "key" in table.column_names:
        keys = flt.matching_keys(pc.unique(table.column("key")).to_pylist())
        table = table.filter(pc.is_in(table.column("key"), value_set=pa.array(keys, pa.string())))
    sort = [(c, "ascending") for c in ("detected_at", "batch_id", "event_time") if c in table.column_names]
    if sort and table.num_rows:
        table = table.sort_by(sort)
    if limit is not None:
        table = table.slice(0, limit)
    if columns is not None:
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise ValueError(f"columns {missing} are not in the late table (has {table.column_names})")
        table = table.select(list(columns))
    return table


def read_late_pandas(path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """:func:`read_late` as a pandas DataFrame.

    Example:
        ``read_late_pandas("/data/late", since="2024-06-01", time_column="detected_at")``
    """
    return read_late(path, **kwargs).to_pandas()


def read_late_spark(
    spark: Any,
    path: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    **filters: Any,
) -> Any:
    """Read the late table as a Spark DataFrame from exactly the Parquet files of the
    current Delta snapshot (no delta-spark needed), with the same filters as :func:`read_late`.

    Object-store URIs are passed to Spark as delta-rs reports them (e.g. ``s3://``);
    configure the matching Hadoop filesystem (or map to ``s3a://``) in Spark.

    Example:
        ``read_late_spark(spark, "/data/late", reason="too_late").groupBy("partition").count()``
    """
    from pyspark.sql import functions as F

    flt = _filter(filters)
    dt = open_late_table(path, storage_options)
    files = dt.file_uris()
    if not files:
        empty = snapshot_dataset(dt).schema.empty_table()
        df = spark.createDataFrame(empty)
    else:
        df = (
            spark.read.option("basePath", os.fspath(path))
            .option("mergeSchema", "true")
            .parquet(*files)
        )
    parts = [_render(F.col(column), op, value) for column, op, value in flt.conditions(df.columns)]
    if flt.key is not None:
        keys = snapshot_dataset(dt).to_table(columns=["key"]).column("key")
        parts.append(F.col("key").isin(flt.matching_keys(pc.unique(keys).to_pylist())))
    cond = _combine(parts)
    return df if cond is None else df.filter(cond)


def _counts(table: pa.Table, column: str, null_label: str = "(none)") -> dict[str, int]:
    if column not in table.column_names or table.num_rows == 0:
        return {}
    vc = pc.value_counts(table.column(column).combine_chunks())
    pairs = [(null_label if v is None else str(v), int(c)) for v, c in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist())]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return dict(pairs)


def _iso(v: Any) -> str | None:
    return None if v is None else v.isoformat()


def summarize(table: pa.Table, top_n: int = 10) -> dict[str, Any]:
    """Summary numbers of a late table (as read by :func:`read_late`).

    Keys: ``total``, ``by_kind``, ``by_reason``, ``by_partition`` (``"(none)"`` for
    null), ``by_hour`` (UTC hour of ``detected_at``, ISO), ``by_event_hour`` (UTC hour
    of ``event_time``), ``max_lateness_ms``, ``mean_lateness_ms``, ``top_keys``
    (``[{"key", "count"}]``), ``first_detected_at``, ``last_detected_at``.

    >>> import pyarrow as pa
    >>> s = summarize(pa.table({"kind": ["late", "invalid"], "reason": ["too_late", "null_timestamp"],
    ...                         "lateness_ms": [500, None]}))
    >>> s["total"], s["by_reason"], s["max_lateness_ms"]
    (2, {'null_timestamp': 1, 'too_late': 1}, 500)
    """
    if not isinstance(table, pa.Table):
        raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
    out: dict[str, Any] = {"total": table.num_rows}
    out["by_kind"] = _counts(table, "kind")
    out["by_reason"] = _counts(table, "reason")
    out["by_partition"] = _counts(table, "partition")
    for name, col in (("by_hour", "detected_at"), ("by_event_hour", "event_time")):
        if col in table.column_names and table.num_rows:
            hours = pc.floor_temporal(table.column(col), unit="hour")
            vc = pc.value_counts(hours.combine_chunks())
            items = sorted(
                (v, int(c)) for v, c in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()) if v is not None
            )
            out[name] = {v.isoformat(): c for v, c in items}
        else:
            out[name] = {}
    if "lateness_ms" in table.column_names and table.num_rows:
        lat = table.column("lateness_ms")
        mx, mean = pc.max(lat).as_py(), pc.mean(lat).as_py()
        out["max_lateness_ms"] = mx
        out["mean_lateness_ms"] = None if mean is None else round(mean, 3)
    else:
        out["max_lateness_ms"] = None
        out["mean_lateness_ms"] = None
    keys = _counts(table, "key", null_label="null")
    out["top_keys"] = [{"key": k, "count": c} for k, c in list(keys.items())[:top_n]]
    if "detected_at" in table.column_names and table.num_rows:
        out["first_detected_at"] = _iso(pc.min(table.column("detected_at")).as_py())
        out["last_detected_at"] = _iso(pc.max(table.column("detected_at")).as_py())
    else:
        out["first_detected_at"] = out["last_detected_at"] = None
    return out
