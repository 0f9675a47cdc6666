"""The operator's output schema (Layout.java reads its positions by name): the kind, the keys,
the pane columns (each aggregation's value and accumulator columns), then the record and
statistics columns, times as bigint epoch ms."""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import types as T

from ..core import aggregations as _agg
from ..core.aggregations import Aggregation
from ..core.contract import COLUMNS, STRINGS
from ..core.kinds import COUNT, MEAN, SUM

__all__ = ["INTEGRAL_TYPES", "agg_type", "OUTPUT_FIXED", "MERGED_FROM", "C_REC", "output_schema", "pane_fields"]

# Output columns besides the key and aggregation columns, in order, with Spark DDL types (the
# contract's: Layout.java finds them by the same names). stat_delays: the partition's delays
# behind the running maximum, {"bin": count} (eventtime/query/advise.py).
OUTPUT_FIXED = list(COLUMNS.items())
# Session panes only: the bounds of the earlier panes of the key that a pane supersedes.
MERGED_FROM = "merged_from"
# The user's row as one struct, beside the output: the payload of late / invalid records.
C_REC = STRINGS["RECORD_COLUMN"]
INTEGRAL_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def agg_type(agg: Aggregation, schema: T.StructType) -> T.DataType:
    if agg.kind == COUNT:
        return T.LongType()
    source = schema[agg.column].dataType
    if agg.kind == SUM:
        if isinstance(source, T.DecimalType):  # Spark's own rule for sum(decimal(p, s))
            return T.DecimalType(min(38, source.precision + 10), source.scale)
        return T.LongType() if isinstance(source, INTEGRAL_TYPES) else T.DoubleType()
    if agg.kind == MEAN:
        return T.DoubleType()
    return source


def pane_fields(agg: Aggregation, result: T.DataType, schema: T.StructType) -> list[T.StructField]:
    """The output columns of one aggregation: its value, then its accumulator columns (a mean's
    sum, typed as ``sum`` of its column, and number of values; first / last's event time; a
    mergeable Spark SQL aggregation's buffer, binary)."""
    extra = agg.accumulator_columns()
    if agg.kind == MEAN:
        total, n = extra
        return [T.StructField(agg.name, result), T.StructField(total, agg_type(_agg.sum(agg.column), schema)),
                T.StructField(n, T.LongType())]
    extra_type = T.BinaryType() if agg.mergeable else T.LongType()
    return [T.StructField(agg.name, result), *(T.StructField(name, extra_type) for name in extra)]


def output_schema(key_fields: Sequence[T.StructField], agg_fields: Sequence[T.StructField]) -> T.StructType:
    """Schema of the operator output (times as bigint epoch ms)."""
    bounds = T.ArrayType(T.StructType([T.StructField("start", T.LongType()), T.StructField("end", T.LongType())]))
    types = {"string": T.StringType(), "bigint": T.LongType(), "boolean": T.BooleanType(),
             "array<struct<start:bigint,end:bigint>>": bounds}
    fixed = [T.StructField(name, types[ddl]) for name, ddl in OUTPUT_FIXED]
    return T.StructType([fixed[0], *key_fields, *fixed[1:6], *agg_fields, *fixed[6:]])
