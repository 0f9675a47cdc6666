"""Spark SQL aggregations (:func:`eventtime.agg`) on the Spark engine: each expression resolved
and typed exactly as the JVM operator resolves it (``eventtime.jvm.SqlAggregate``), on the
driver, before the query starts."""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import types as T

from ..core.aggregations import Aggregation
from ..core.kinds import SQL_AGGREGATE
from .engine import ensure_engine

__all__ = ["sql_result_types"]


def sql_result_types(spark, record_type: T.StructType, aggregations: Sequence[Aggregation]) -> dict:
    """Each Spark SQL aggregation's result type, resolved as the engine resolves it (Spark's
    analyzer over the record's columns; ``SqlAggregate.java``): an expression that is not one
    deterministic aggregate call over the input's columns is refused here, before the query."""
    out = {}
    for i, agg in enumerate(aggregations):
        if agg.kind != SQL_AGGREGATE:
            continue
        ensure_engine(spark)
        try:
            resolved = spark._jvm.eventtime.jvm.SqlAggregate.of(
                agg.expression, spark._jsparkSession.parseDataType(record_type.json()))
        except Exception as exc:  # AnalysisException, ParseException, IllegalArgumentException
            reason = (exc.getMessage() if hasattr(exc, "getMessage") else "") or str(exc) or type(exc).__name__
            raise ValueError(f"window_aggregate: aggregations[{i}] ({agg.name!r}) cannot run {agg.expression!r}: "
                             f"{reason.splitlines()[0]} (the input's columns: {', '.join(record_type.names)})") from None
        out[agg.name] = T._parse_datatype_json_string(resolved.resultTypeJson())
    return out
