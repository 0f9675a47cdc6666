"""Reading the Delta tables eventtime writes (the current snapshot's files, the latest pane
of each window) and their maintenance (``compact``)."""

from __future__ import annotations

import os
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..core.reconcile import CORRECTION
from ..ops.paths import local_path
from .closed import recorded_watermarks, with_closed

__all__ = ["check_name", "check_path", "check_writable", "same_table", "table_layout", "snapshot_dataset",
           "latest_panes", "compact", "check_table_columns", "PIPELINE_PROPERTY", "record_pipeline",
           "recorded_pipelines"]


def check_path(path: object) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if not path:
        raise ValueError("path must not be empty")
    return path

# ---------------------------------------------------------------------------
# what is at a sink's path


# Spark's simpleString of a type -> Delta's type name (the names TABLE_COLUMNS uses)
_SPARK_TYPE_NAMES = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}


def _delta_type_name(delta_type: Any) -> str:
    name = getattr(delta_type, "type", None)  # a delta-rs PrimitiveType: "long", "string", ...
    return name if isinstance(name, str) else str(delta_type)


def table_layout(path: str, storage_options: Mapping[str, str] | None, spark: Any = None):
    """``(columns {name: Delta type}, partition columns)`` of the Delta table at ``path`` from
    its ``_delta_log``, or ``None`` when there is no Delta table there. Read with delta-rs; with
    a Spark session that has Delta, through Spark when delta-rs cannot open the table (a reader
    feature it lacks)."""
    from deltalake import DeltaTable

    options = dict(storage_options) if storage_options else None
    try:
        if not DeltaTable.is_deltatable(path, options):
            return None
    except OSError:
        if "://" in path and not path.startswith("file:"):
            return None  # a remote store without credentials here: it reports them at the first write
        raise
    try:
        dt = DeltaTable(path, storage_options=options)
        columns = {f.name: _delta_type_name(f.type) for f in dt.schema().fields}
        return columns, list(dt.metadata().partition_columns)
    except Exception:  # noqa: BLE001 - a table delta-rs cannot read: ask Spark's Delta, if there is one
        from .spark_delta import spark_has_delta

        if not spark_has_delta(spark):
            raise
        columns = {f.name: _SPARK_TYPE_NAMES.get(f.dataType.simpleString(), f.dataType.simpleString())
                   for f in spark.read.format("delta").load(path).schema.fields}
        quoted = path.replace("`", "``")
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{quoted}`").collect()[0]
        return columns, list(detail["partitionColumns"] or [])


def check_table_columns(
    path: str,
    sink: str,
    what: str,
    required: Mapping[str, str],
    typed: Mapping[str, str],
    partition_by: list[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    spark: Any = None,
) -> None:
    """Refuse a Delta table at ``path`` that is not one a sink writing ``what`` can append to:
    a column of ``required`` missing, a column of ``typed`` with another type, or (when
    ``partition_by`` is given) other partition columns. Nothing at ``path`` passes: the first
    write creates the table. The ``ValueError`` names the sink, the path, the table's columns
    and what to do; the same check runs for the delta-rs and the delta-spark write paths.
    """
    layout = table_layout(path, storage_options, spark)
    if layout is None:
        return
    columns, partitions = layout
    problems = []
    missing = [c for c in required if c not in columns]
    if missing:
        problems.append(f"it lacks the column(s) {', '.join(missing)}")
    wrong = [f"{c} is {columns[c]}, not {t}" for c, t in typed.items() if c in columns and columns[c] != t]
    if wrong:
        problems.append("; ".join(wrong))
    if not problems and partition_by is not None and partitions != list(partition_by):
        problems.append(
            f"it is partitioned by {partitions or 'nothing'}, the sink writes partitioned by {list(partition_by)}"
        )
    if problems:
        listed = ", ".join(f"{c} {t}" for c, t in columns.items()) or "none"
        raise ValueError(
            f"{sink}: the Delta table at {path!r} is not a table of {what} that this sink can append to: "
            f"{'; '.join(problems)} (its columns: {listed}; partitioned by {partitions or 'nothing'}). "
            f"Give the sink a path of its own (a new one, or a table this kind of sink wrote), "
            f"or move the table at {path!r} away."
        )


# ---------------------------------------------------------------------------
# the pipeline a table holds, in its properties (what eventtime late reconcile reads)

#: The table property that holds a pipeline's window, aggregations and keys: ``<prefix><pipeline>``.
PIPELINE_PROPERTY = "eventtime.pipeline."


def recorded_pipelines(path: str, storage_options: Mapping[str, str] | None = None) -> dict[str, dict]:
    """``{pipeline: document}`` recorded in the Delta table's properties by :func:`record_pipeline`."""
    from deltalake import DeltaTable

    return _pipeline_documents(DeltaTable(path, storage_options=dict(storage_options) if storage_options else None))


def _pipeline_documents(dt: Any) -> dict[str, dict]:
    import json

    return {k[len(PIPELINE_PROPERTY):]: json.loads(v) for k, v in dt.metadata().configuration.items()
            if k.startswith(PIPELINE_PROPERTY) and v}


def record_pipeline(path: str, pipeline: str, document: Mapping[str, Any],
                    storage_options: Mapping[str, str] | None = None, spark: Any = None) -> bool:
    """Record ``document`` (the pipeline's configuration and keys, as ``route`` starts it) in the
    Delta table's properties, through Spark's Delta when ``spark`` is given (nothing is written
    when the table already holds the same). False when there is no table at ``path`` yet."""
    import json

    from deltalake import DeltaTable

    text = json.dumps(dict(document), sort_keys=True)
    options = dict(storage_options) if storage_options else None
    if not DeltaTable.is_deltatable(path, options):
        return False
    key = PIPELINE_PROPERTY + pipeline
    if DeltaTable(path, storage_options=options).metadata().configuration.get(key) == text:
        return True
    if spark is not None:
        quoted = path.replace("`", "``")

        def literal(v: str) -> str:
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"

        spark.sql(f"ALTER TABLE delta.`{quoted}` SET TBLPROPERTIES ({literal(key)} = {literal(text)})")
    else:
        DeltaTable(path, storage_options=options).alter.set_table_properties({key: text}, raise_if_not_exists=False)
    return True


# ---------------------------------------------------------------------------
# reading panes, maintenance


_SAFE_READER_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "checkpointProtection"}


def snapshot_dataset(dt: Any) -> "Any":
    """A ``pyarrow.dataset.Dataset`` over exactly the data files of the table's current
    snapshot, read with pyarrow's own local filesystem.

    delta-rs' ``to_pyarrow_dataset()`` reads through a Python filesystem handler; a
    process that used it often aborts at interpreter exit ("terminate called without
    an active exception", exit 134; delta-rs#2184, arrow#34314 -- about 9 runs in 10
    here). Local tables without deletion vectors or column mapping are therefore read
    directly: ``file_uris()`` + the table schema + hive partition values. Other
    tables (object stores, reader features) fall back to ``to_pyarrow_dataset()``.
    """
    import urllib.parse

    import pyarrow.dataset as ds

    uri = dt.table_uri
    parsed = urllib.parse.urlparse(uri)
    proto = dt.protocol()
    features = set(proto.reader_features or [])
    plain = proto.min_reader_version == 1 or (proto.min_reader_version >= 3 and features <= _SAFE_READER_FEATURES)
    if parsed.scheme not in ("", "file") or not plain:
        return dt.to_pyarrow_dataset()
    root = urllib.parse.unquote(parsed.path).rstrip("/") or "/"
    schema = pa.schema(dt.schema().to_arrow())
    part_cols = list(dt.metadata().partition_columns)
    partitioning = (
        ds.partitioning(pa.schema([schema.field(c) for c in part_cols]), flavor="hive") if part_cols else None
    )
    return ds.dataset(
        dt.file_uris(), schema=schema, format="parquet", partitioning=partitioning, partition_base_dir=root
    )


def latest_panes(
    path: str | os.PathLike[str],
    storage_options: Mapping[str, str] | None = None,
    pipeline: str | None = None,
    corrections: bool = True,
) -> "Any":
    """The latest pane per ``(pipeline, key, window_start, window_end)`` of a results table
    as a pandas DataFrame: the highest ``pane_index`` (ties: the highest ``batch_id``).
    ``corrections=False`` leaves out the CORRECTION panes of ``eventtime late reconcile``: the
    results as the stream alone wrote them.

    Column ``closed``: no pane of the stream will change the window any more. Its pipeline's
    watermark, as the last batch that wrote panes to the table recorded it, has passed the
    window's end plus the allowed lateness (``window_end - 1 ms + allowed_lateness <=
    watermark``: the window is expired, its state purged; docs/semantics.md). A window can be
    closed with ``is_final`` false: its last pane fired before it expired (allowed lateness),
    or was LATE. Only ``eventtime late reconcile`` adds CORRECTION panes to a closed window.

    With session windows a pane can supersede earlier sessions of its key (its
    ``merged_from``); a superseded session is not current and is left out.

    Example:
        ``latest_panes("/data/results").query("closed")``
    """
    from deltalake import DeltaTable

    path = check_path(path)
    dt = DeltaTable(path, storage_options=dict(storage_options) if storage_options else None)
    dataset = snapshot_dataset(dt)
    expr = None if pipeline is None else (pc.field("pipeline") == pipeline)
    if not corrections and "pane_timing" in dataset.schema.names:
        stream = pc.field("pane_timing") != CORRECTION
        expr = stream if expr is None else expr & stream
    df = dataset.to_table(filter=expr).to_pandas()
    if df.empty:
        return df.assign(closed=df["is_final"].astype(bool) if "is_final" in df else [])
    import pandas as pd

    group = ["pipeline", "key", "window_start", "window_end"]
    every = df.assign(_written=pd.MultiIndex.from_arrays([df["written_at"], df["batch_id"]]).factorize(sort=True)[0])
    df = every.sort_values(group + ["pane_index", "_written"], ascending=[True] * 4 + [False, False], kind="stable")
    df = df.drop_duplicates(subset=group, keep="first").reset_index(drop=True)
    if "merged_from" in df.columns:
        df = _without_superseded(df, every, group)
    return with_closed(df.drop(columns="_written"), recorded_watermarks(dt), _pipeline_documents(dt))


def _without_superseded(df: "Any", every: "Any", group: list[str]) -> "Any":
    """Drops the sessions that a pane of the same write or a later one replaced (its
    ``merged_from``), looking at every pane (``every``), not only the latest ones: a CORRECTION
    pane at a session's bounds replaces the pane that listed what the session superseded.

    A later session of the key can have the same bounds as a replaced one (after it expired);
    it was written after the pane that replaced the old one, so it stays. Writes are ordered by
    ``(written_at, batch_id)`` (``_written``): a reconcile run's panes have batch ids of their own.
    """
    import pandas as pd

    rows = [
        (p, k, b["start"], b["end"], written)
        for p, k, merged, written in zip(every["pipeline"], every["key"], every["merged_from"], every["_written"])
        if merged is not None
        for b in merged
    ]
    if not rows:
        return df
    replaced = pd.DataFrame(rows, columns=[*group, "replaced_in"]).groupby(group, as_index=False)["replaced_in"].max()
    merged = df.merge(replaced, on=group, how="left")
    keep = merged["replaced_in"].isna() | (merged["replaced_in"] < merged["_written"])
    return merged[keep].drop(columns="replaced_in").reset_index(drop=True)


def compact(
    path: str | os.PathLike[str],
    storage_options: Mapping[str, str] | None = None,
    target_size: int | None = None,
    vacuum: bool = False,
    retention_hours: int | None = None,
    enforce_retention_duration: bool = True,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Small-file hygiene: ``optimize.compact()`` the table, then optionally ``vacuum`` it.

    App transactions survive compaction (they live in the log state), so exactly-once
    skipping keeps working. Returns ``{"compact": <delta-rs metrics>, "vacuumed": [files]}``.

    Example:
        ``compact("/data/late", vacuum=True, retention_hours=168)``
    """
    from deltalake import DeltaTable

    path = check_path(path)
    if target_size is not None and (isinstance(target_size, bool) or not isinstance(target_size, int) or target_size <= 0):
        raise ValueError(f"target_size must be a positive int of bytes, got {target_size!r}")
    if retention_hours is not None and (
        isinstance(retention_hours, bool) or not isinstance(retention_hours, int) or retention_hours < 0
    ):
        raise ValueError(f"retention_hours must be an int >= 0, got {retention_hours!r}")
    dt = DeltaTable(path, storage_options=dict(storage_options) if storage_options else None)
    metrics = dt.optimize.compact(target_size=target_size)
    vacuumed: list[str] = []
    if vacuum:
        dt.update_incremental()
        vacuumed = dt.vacuum(
            retention_hours=retention_hours,
            dry_run=dry_run,
            enforce_retention_duration=enforce_retention_duration,
            full=True,  # files no commit ever named too: a failed attempt's, written by Spark's tasks
        )
    return {"compact": metrics, "vacuumed": list(vacuumed)}


def check_writable(path: str, sink: str) -> None:
    """Refuse, when the sink is made, a local table path that cannot be created or written.

    The check is a real one, and leaves nothing behind: the missing directories are made, a
    probe file is written in the table directory (and in ``_delta_log`` when the table
    exists), then what was made is removed. Remote URIs (``s3://``, ``abfss://``, ``gs://``...)
    are not checked here: their store reports a missing bucket or credential at the first
    write (which :class:`DeltaSinkError` names, after the retries).
    """
    import tempfile

    local = local_path(path)
    if local is None:
        return
    existing = local
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    why = None
    if os.path.exists(local) and not os.path.isdir(local):
        why = "it is a file, not a directory"
    elif not os.path.isdir(existing):
        why = f"{existing} is a file, so the table directory cannot be created under it"
    if why is None:
        created: list[str] = []
        try:
            missing = []
            probe_dir = local
            while probe_dir != existing:
                missing.append(probe_dir)
                probe_dir = os.path.dirname(probe_dir)
            for directory in reversed(missing):
                os.mkdir(directory)
                created.append(directory)
            for directory in (local, os.path.join(local, "_delta_log")):
                if os.path.isdir(directory):
                    fd, probe = tempfile.mkstemp(prefix=".eventtime-write-check-", dir=directory)
                    os.close(fd)
                    os.remove(probe)
        except OSError as exc:
            what = exc.filename if exc.filename else local
            why = f"{what} cannot be created or written: {exc.strerror or exc}"
        finally:
            for directory in reversed(created):
                try:
                    os.rmdir(directory)
                except OSError:
                    pass
    if why is not None:
        raise ValueError(f"{sink}: the table path {path!r} cannot be written: {why}")


def check_name(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def same_table(a: str, b: str) -> bool:
    la, lb = local_path(a), local_path(b)
    if la is not None and lb is not None:
        return os.path.realpath(la) == os.path.realpath(lb)
    return a.rstrip("/") == b.rstrip("/")
