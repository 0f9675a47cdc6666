"""Reconcile's merges of mergeable Spark SQL aggregations (``eventtime.agg(..., mergeable=True)``):
the late records' payloads read back as the pipeline's rows, and each correction's value and
buffer computed by Spark's own function from the panes' buffers and the records
(``eventtime.jvm.output.PaneMerge``), in the session ``reconcile`` is given."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Mapping, Sequence

from ..core.aggregations import ACC_BUFFER
from ..core.config import EngineConfig
from ..core.reconcile import Correction, SparkMerge
from .engine import ensure_engine

__all__ = ["merging_session", "unreadable_payloads", "merge_in_spark"]

_CORRUPT = "et__corrupt"
log = logging.getLogger(__name__)


def merging_session(config: EngineConfig, document: Mapping[str, Any], pipeline: str, spark: Any) -> Any:
    """The session that merges the pipeline's mergeable Spark SQL aggregations: ``spark``, the
    active one, or a local one started now; refused when the tables record no record type."""
    names = ", ".join(agg.name for agg in config.aggregations if agg.mergeable)
    if "record_type" not in document:
        raise ValueError(f"reconcile: pipeline {pipeline!r} records no record type for its Spark SQL aggregations "
                         f"({names}): run its query once with this version, then reconcile")
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is None:
        from .session import local_session

        log.info("reconcile: starting a local Spark session to merge pipeline %r's Spark SQL aggregations (%s)",
                 pipeline, names)
        spark = local_session(master="local[1]", app_name="eventtime-reconcile", shuffle_partitions=1)
    return spark


def _record_type(record_type_json: str):
    from pyspark.sql import types as T

    return T._parse_datatype_json_string(record_type_json)


def unreadable_payloads(spark: Any, record_type_json: str, payloads: Sequence[str]) -> dict[int, str]:
    """``{i: why}`` for the payloads Spark's JSON reader does not read as the pipeline's row."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not payloads:
        return {}
    schema = _record_type(record_type_json).add(T.StructField(_CORRUPT, T.StringType()))
    df = spark.createDataFrame(list(enumerate(payloads)), "i int, payload string")
    parsed = df.select("i", F.from_json("payload", schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
                       .alias("r"))
    bad = parsed.where(F.col("r").isNull() | F.col(f"r.{_CORRUPT}").isNotNull()).select("i").collect()
    return {row[0]: "payload: Spark does not read it as the pipeline's row" for row in bad}


def _plain(value: Any) -> Any:
    """A collected value as the results table takes it (structs as dicts)."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def merge_in_spark(spark: Any, config: EngineConfig, record_type_json: str, corrections: list[Correction],
                   payloads: Mapping[str, str]) -> list[Correction]:
    """``corrections`` with each :class:`SparkMerge` replaced by the aggregation's value and
    buffer column, computed by Spark's function over the panes' buffers and the late records
    (``payloads``: each record id's payload)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    ensure_engine(spark)
    values: list[dict] = [dict(c.values) for c in corrections]
    for agg in config.aggregations:
        if not agg.mergeable:
            continue
        cells = []
        for i, v in enumerate(values):
            merge: SparkMerge = v[agg.name]
            cells += [(i, b, None) for b in merge.buffers] + [(i, None, payloads[r]) for r in merge.record_ids]
            if not merge.buffers and not merge.record_ids:  # sessions merged, discarding: a new buffer's value
                cells.append((i, None, None))
        df = spark.createDataFrame(cells, "cell int, buffer binary, payload string")
        df = df.select("cell", "buffer", F.from_json("payload", _record_type(record_type_json)).alias("record"))
        merged = DataFrame(spark._jvm.eventtime.jvm.output.PaneMerge.merge(df._jdf, agg.expression, record_type_json), spark)
        for cell, value, buffer in merged.collect():
            values[cell][agg.name] = _plain(value)
            values[cell][agg.name + ACC_BUFFER] = bytes(buffer)
    return [dataclasses.replace(c, values=v) for c, v in zip(corrections, values)]
