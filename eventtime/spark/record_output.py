"""A batch's late and invalid records written by Spark's own Parquet writer into a delta-rs
table, built row by row in the JVM: the rows never reach a Python worker.

The late table's row of a record (:mod:`eventtime.sinks.schema`: the run's columns, the record
columns, ``key`` and ``payload`` as exact JSON by ``JsonText.java``, the same text as
:mod:`eventtime.ops.json_text`) is a projection of ``window_aggregate``'s output. Spark's tasks
write it as Parquet files (timestamps as ``TIMESTAMP_MICROS``, Delta's type) into a folder of
their own inside the table's folder; the driver reads the files' footers (their row counts) and
commits them as the Python tasks' files are committed
(:func:`eventtime.sinks.delta_files.commit_batch`). No commit names the files of an attempt
that fails: readers never see them and ``eventtime late optimize --vacuum`` removes them.

The batch's counts by kind and reason, and the alerter's samples (:data:`SAMPLE_ROWS` per kind
and reason), come from Spark's aggregation over the same rows.
"""

from __future__ import annotations

import os
import urllib.parse
import uuid
from typing import Any, Optional

from ..core.kinds import RECORD_KINDS
from .aggregate import C_REC

__all__ = ["supports", "record_frame", "write_parquet", "record_counts", "record_sample"]

_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_RECORD_COLUMNS = ("event_time", "raw_timestamp", "watermark", "lateness_ms", "window_start", "window_end",
                   "partition", "offset")


def supports(df, keys: list) -> bool:
    """Whether every key column and the user's row of ``df`` (the operator's output) have a
    JSON rule in the JVM and a Delta type Spark writes as the Python tasks do."""
    from pyspark.sql import types as T

    jvm = df.sparkSession._jvm.eventtime.jvm.JsonText
    fields = {f.name: f.dataType for f in df.schema.fields}
    row = fields.get(C_REC, T.StructType())
    for k in keys:
        if isinstance(fields[k], (T.TimestampNTZType, T.StructType, T.ArrayType, T.MapType, T.BinaryType, T.NullType)):
            return False
    structure = T.StructType([T.StructField(f"k{i}", fields[k]) for i, k in enumerate(keys)] + [
        T.StructField("row", row)])
    return jvm.supports(df.sparkSession._jsparkSession.parseDataType(structure.json()))


def _json(df, struct, compact: bool):
    from pyspark.sql import Column

    return Column(df.sparkSession._jvm.eventtime.jvm.JsonText.column(struct._jc, compact))


def record_frame(df, keys: list, kinds: tuple, pipeline: str, query_id: str, batch_id: int, now):
    """The late table's rows of ``kinds`` of the batch ``df`` (``now``: the batch's time by the
    sink's clock, UTC), in the column order :func:`eventtime.sinks.schema._prepare_records`
    gives them."""
    from pyspark.sql import functions as F

    records = df.filter(F.col("kind").isin(list(kinds)))
    payload = _json(df, F.col(C_REC), False) if C_REC in df.columns else F.col("payload")
    cols = [
        F.lit(pipeline).alias("pipeline"),
        F.lit(query_id).alias("query_id"),
        F.lit(batch_id).cast("long").alias("batch_id"),
        F.lit(now).alias("detected_at"),
        F.lit(now.date()).alias("detected_date"),
        F.concat(F.lit(f"{query_id}:{batch_id}:s"), F.monotonically_increasing_id().cast("string")).alias("record_id"),
        F.col("kind"), F.col("reason"),
        (_json(df, F.struct(*[F.col(k) for k in keys]), True) if keys else F.lit("{}")).alias("key"),
        *[F.col(c) for c in _RECORD_COLUMNS],
        payload.alias("payload"),
    ]
    taken = {"pipeline", "query_id", "batch_id", "detected_at", "detected_date", "record_id", "kind", "reason", "key",
             "payload", *_RECORD_COLUMNS}
    cols += [F.col(k) for k in keys if k not in taken]
    return records.select(*cols)


def write_parquet(frame, root: str, partition_by: list) -> list:
    """Spark's tasks write ``frame`` as Parquet files into a new folder of the table's folder
    ``root``; what :func:`eventtime.sinks.delta_files.commit_files` takes of each file (path,
    size, rows, partition values, the rows' Arrow schema)."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = frame.sparkSession
    folder = f"spark-{uuid.uuid4().hex}"
    before = spark.conf.get(_TIMESTAMP_TYPE, None)
    spark.conf.set(_TIMESTAMP_TYPE, "TIMESTAMP_MICROS")
    try:
        writer = frame.write.mode("append").option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.parquet(os.path.join(root, folder))
    finally:
        if before is None:
            spark.conf.unset(_TIMESTAMP_TYPE)
        else:
            spark.conf.set(_TIMESTAMP_TYPE, before)
    arrow = to_arrow_schema(frame.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")
    arrow = pa.schema([f.with_nullable(True) for f in arrow])
    schema = base64.b64encode(arrow.serialize().to_pybytes()).decode()
    files = []
    for directory, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if not name.endswith(".parquet"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            values = {}
            for part in os.path.relpath(directory, os.path.join(root, folder)).split(os.sep):
                if "=" in part:
                    column, text = part.split("=", 1)
                    values[column] = None if text == _HIVE_NULL else urllib.parse.unquote(text)
            files.append({"path": relative, "size": os.path.getsize(path), "rows": pq.read_metadata(path).num_rows,
                          "partition_values": {c: values.get(c) for c in partition_by}, "schema": schema})
    return files


def record_counts(df) -> dict:
    """The batch's records counted by ``"kind/reason"`` as the tasks count them
    (:class:`~.task_output._Counts`' ``reasons``), with the records' largest watermark (ms)."""
    from pyspark.sql import functions as F

    rows = (df.filter(F.col("kind").isin(list(RECORD_KINDS)))
            .groupBy("kind", "reason")
            .agg(F.count(F.lit(1)).alias("n"), F.max("lateness_ms").alias("late"),
                 F.collect_set("partition").alias("parts"), F.max(F.unix_millis("watermark")).alias("w"))
            .collect())
    reasons: dict = {}
    watermark: Optional[int] = None
    for r in rows:
        reasons[f"{r['kind']}/{r['reason']}"] = {"count": r["n"], "partitions": sorted(str(p) for p in r["parts"]),
                                                 "max_lateness_ms": r["late"]}
        if r["w"] is not None:
            watermark = r["w"] if watermark is None else max(watermark, r["w"])
    return {"reasons": reasons, "watermark_ms": watermark}


def record_sample(df, reasons: dict, limit: int) -> list[Any]:
    """Up to ``limit`` rows of the operator's output per ``"kind/reason"`` of ``reasons``, as
    Arrow tables of the batch's columns (what :func:`~.batch_tables.split` takes)."""
    from pyspark.sql import functions as F

    tables = []
    for key in reasons:
        kind, reason = key.split("/", 1)
        tables.append(df.filter((F.col("kind") == kind) & (F.col("reason") == reason)).limit(limit).toArrow())
    return tables
