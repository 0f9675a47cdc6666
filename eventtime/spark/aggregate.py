"""``window_aggregate``: plans the JVM operator over the output of ``with_event_time``.

It checks the keys and aggregated columns against the DataFrame, builds the operator input
(the user's row as one struct beside its key and aggregated columns), hands the engine its
plan (spark/plan.py: window, lateness, modes, types, in one document) and renders the operator output with a
``kind`` column -- panes, late and invalid records, per-partition statistics -- that
``route`` (router.py) splits into sinks (docs/architecture.md).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core import aggregations as _agg
from ..core._duration import to_ms
from ..core.aggregations import Aggregation
from ..core.config import EngineConfig
from ..core.contract import INTS
from ..core.kinds import MAX, MEAN, MIN, SQL_AGGREGATE, SUM, UDAF
from ..core.trigger import ACCUMULATING, ON_TIME_AND_LATE
from ..core.watermark import GLOBAL, WatermarkPolicy
from ..core.window import WindowAssigner
from .connect import require_classic
from .extract import event_time_settings
from .engine import ensure_engine
from .output import INTEGRAL_TYPES, C_REC, MERGED_FROM, OUTPUT_FIXED, agg_type, output_schema, pane_fields
from .plan import operator_plan
from .sql_aggregates import engine_aggregations, python_result, result_ddl

__all__ = ["window_aggregate", "output_schema"]

# Row classes of the operator input (Layout.java).
CLS_DATA, CLS_HEARTBEAT, CLS_INVALID, CLS_CONTROL, CLS_TICK = (INTS[n] for n in (
    "CLS_DATA", "CLS_HEARTBEAT", "CLS_INVALID", "CLS_CONTROL", "CLS_TICK"))  # the contract: eventtime/contract.json
_TS_COLUMNS = ("window_start", "window_end", "event_time", "watermark")


_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
_ORDERED = (*_NUMERIC, T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType, T.BinaryType)


def _check_keys(keys: Any) -> list[str]:
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, (list, tuple)):
        raise TypeError(f"keys must be a column name or a list of column names, got {type(keys).__name__} {keys!r}")
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise TypeError(f"keys[{i}] must be a column name (str), got {type(key).__name__} {key!r}")
    duplicated = sorted({k for k in keys if list(keys).count(k) > 1})
    if duplicated:
        raise ValueError(f"keys must be distinct, {duplicated} appear more than once")
    return list(keys)


def _check_columns(
    schema: T.StructType,
    user_cols: list[str],
    keys: list[str],
    aggregations: Sequence[Aggregation],
    partition_col: Optional[str],
    offset_col: Optional[str],
    heartbeat_col: Optional[str],
) -> None:
    """Every column window_aggregate reads exists and has a type it can use (before the query starts)."""

    def need(parameter: str, column: str) -> T.DataType:
        if column not in user_cols:
            raise ValueError(f"window_aggregate: {parameter} names column {column!r}, which is not in the input; columns: {user_cols}")
        return schema[column].dataType

    for i, key in enumerate(keys):
        need(f"keys[{i}]", key)
    for i, agg in enumerate(aggregations):
        if agg.column is None:
            continue
        dtype = need(f"aggregations[{i}] ({agg.kind} {agg.name!r})", agg.column)
        if agg.kind in (SUM, MEAN) and not isinstance(dtype, _NUMERIC):
            raise TypeError(
                f"aggregations[{i}]: {agg.kind}({agg.column!r}) needs a numeric column, but {agg.column!r} is "
                f"{dtype.simpleString()}; cast it first (e.g. F.col({agg.column!r}).cast('double'))"
            )
        if agg.kind in (MIN, MAX) and not isinstance(dtype, _ORDERED):
            raise TypeError(
                f"aggregations[{i}]: {agg.kind}({agg.column!r}) needs an orderable column (number, string, boolean, "
                f"date, timestamp, binary), but {agg.column!r} is {dtype.simpleString()}"
            )
    if partition_col is not None:
        dtype = need("partition_col", partition_col)
        if isinstance(dtype, (T.ArrayType, T.MapType, T.StructType)):
            raise TypeError(f"partition_col {partition_col!r} must be a plain column (int, string, ...), got {dtype.simpleString()}")
    if offset_col is not None:
        dtype = need("offset_col", offset_col)
        if not isinstance(dtype, INTEGRAL_TYPES):
            raise TypeError(f"offset_col {offset_col!r} must be an integer column (the source offset), got {dtype.simpleString()}")
    if heartbeat_col is not None:
        dtype = need("heartbeat_col", heartbeat_col)
        if not isinstance(dtype, T.BooleanType):
            raise TypeError(
                f"heartbeat_col {heartbeat_col!r} must be a boolean column (true on heartbeat rows), got "
                f"{dtype.simpleString()}; e.g. F.col({heartbeat_col!r}) == 1"
            )


def window_aggregate(
    keys: Sequence[str],
    window: WindowAssigner,
    allowed_lateness: Any = 0,
    aggregations: Optional[Sequence[Aggregation]] = None,
    accumulation: str = ACCUMULATING,
    emit: str = ON_TIME_AND_LATE,
    partition_col: Optional[str] = None,
    offset_col: Optional[str] = None,
    heartbeat_col: Optional[str] = None,
    watermark: str = GLOBAL,
    idle_timeout: Any = None,
    report_partly_late: bool = False,
    split_invalid: bool = False,
    source_partitions: Sequence[Any] = (),
) -> Callable[[DataFrame], DataFrame]:
    """A ``DataFrame.transform`` step: event-time windows per ``keys`` with allowed lateness.

    Apply after :func:`with_event_time`. The result has one row per pane, late record,
    invalid record and per-partition statistic (column ``kind``); give it to :func:`route`.
    The built-in aggregations and Spark SQL ones (:func:`eventtime.agg`) run in the JVM
    operator; a Python one (:func:`eventtime.aggregate`) has its window's values kept there and
    runs in Python over each fired pane.

    ``watermark="per_partition"`` (with ``partition_col``, e.g. Kafka's ``partition``) moves
    the watermark by the slowest active source partition instead of the global maximum, and
    ``idle_timeout`` (e.g. ``"1 minute"``) leaves a silent partition out of it
    (docs/semantics.md, "Per-partition watermarks"):

    >>> out = events.transform(window_aggregate(keys=["user_id"], window=Tumbling("1 minute"),
    ...     partition_col="partition", watermark="per_partition", idle_timeout="1 minute"))  # doctest: +SKIP

    ``source_partitions`` (e.g. ``range(4)`` for a 4-partition Kafka topic) names the partitions
    the source will deliver: one that has not delivered a record yet holds the watermark back
    from the first batch until it does, or until ``idle_timeout`` passes (Flink's per-split
    watermarks), so its first records are not late at once.

    ``report_partly_late=True`` also sends a record that is too late for some of its sliding
    windows (and added to the others) to the late output, reason ``partly_late``, with the span
    of the windows it missed, so that ``eventtime late reconcile`` corrects those too.

    ``split_invalid=True`` writes invalid records (bogus, null or far-future event times) from
    the input beside the operator instead of through its shuffle and state: a flood of them
    then costs a filter and a projection (docs/performance.md), but Spark reads the input a
    second time in each batch -- the source, and every step before this one (a Kafka topic is
    fetched twice, ``enrich_async`` looks every key up twice). The output is the same.
    """
    keys = _check_keys(keys)
    aggregations = tuple(aggregations) if isinstance(aggregations, (list, tuple)) else (
        (_agg.count(),) if aggregations is None else aggregations
    )
    lateness_ms = to_ms(allowed_lateness, "allowed_lateness")
    policy = WatermarkPolicy(watermark, idle_timeout_ms=idle_timeout, source_partitions=source_partitions)
    if policy.per_partition and partition_col is None:
        raise ValueError(
            "watermark='per_partition' needs partition_col: the column that names each record's source partition "
            "(e.g. Kafka's 'partition')"
        )
    # Window, aggregations (objects, distinct names), lateness and modes, before any Spark work.
    EngineConfig(window, aggregations, allowed_lateness_ms=lateness_ms, accumulation=accumulation, emit=emit,
                 watermark=policy, report_partly_late=report_partly_late)
    for i, agg in enumerate(aggregations):
        if agg.kind == UDAF:
            result_ddl(i, agg)  # a Python aggregation's result type is known
    if not isinstance(split_invalid, bool):
        raise TypeError(f"split_invalid must be a bool, got {type(split_invalid).__name__} {split_invalid!r}")
    for parameter, value in (("partition_col", partition_col), ("offset_col", offset_col), ("heartbeat_col", heartbeat_col)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{parameter} must be a column name (str) or None, got {type(value).__name__} {value!r}")
    for i, agg in enumerate(aggregations):
        if agg.name in keys:
            raise ValueError(
                f"aggregations[{i}] ({agg.kind}) is named {agg.name!r}, which is a key column: a pane would have two "
                f"columns of that name. Name the aggregation otherwise, e.g. name={agg.name + '_' + agg.kind!r}")
    reserved = {name for name, _ in OUTPUT_FIXED}
    for parameter, names in (("keys", keys), ("aggregations (output names)", [a.name for a in aggregations])):
        for name in names:
            if name in reserved or name.startswith(("__et_", "et__")):
                raise ValueError(
                    f"{parameter}: column name {name!r} is reserved: the output and the late-data table have a "
                    f"column of that name ({', '.join(sorted(reserved))}). Rename it first, e.g. "
                    f"df.withColumnRenamed({name!r}, 'source_{name}')"
                )

    def apply(df: DataFrame) -> DataFrame:
        require_classic(df, "window_aggregate")
        settings = event_time_settings(df)
        user_cols = [c for c in df.columns if not c.startswith("__et_")]
        schema = df.schema
        _check_columns(schema, user_cols, keys, aggregations, partition_col, offset_col, heartbeat_col)
        record_type, spark = T.StructType([schema[c] for c in user_cols]), df.sparkSession
        # as the operator runs them: Spark SQL ones resolved (as it resolves them), Python ones as their values
        engine_aggs, types, finish = engine_aggregations(spark, record_type, aggregations)
        # Validates window, aggregations, lateness, modes and the extraction settings at once.
        config = EngineConfig(
            window,
            engine_aggs,
            max_out_of_orderness_ms=settings.get("max_out_of_orderness_ms", 0),
            allowed_lateness_ms=lateness_ms,
            accumulation=accumulation,
            emit=emit,
            min_valid_ms=settings.get("min_valid_ms", 1),
            max_future_ms=settings.get("max_future_ms", 0),
            watermark=policy,
            report_partly_late=report_partly_late,
        )
        key_fields = [T.StructField(k, schema[k].dataType) for k in keys]
        types.update({a.name: agg_type(a, schema) for a in engine_aggs if a.kind != SQL_AGGREGATE})
        out_schema = output_schema(key_fields, [f for a in engine_aggs for f in pane_fields(a, types[a.name], schema)])
        # The operator input (eventtime/spark/engine/src/eventtime/jvm/plan/Layout.java): the event time as a
        # plain long (no watermark metadata, so Spark drops nothing before the operator), the row
        # class, the invalid reason / raw text, partition (Spark's own text of it) and offset,
        # the user's row as one struct, then the key and aggregated columns on their own.
        reason = F.col("__et_reason")
        ms = F.col("__et_ms") if isinstance(schema["__et_ms"].dataType, T.LongType) else F.col("__et_ms").cast("long")
        cls = None  # the class of a valid row
        if "__et_end" in df.columns:  # the end-of-input control row of a stream (spark/extract.py)
            cls = F.when(F.col("__et_end"), F.lit(CLS_CONTROL))
        if heartbeat_col:
            hb = F.coalesce(F.col(heartbeat_col), F.lit(False))
            cls = F.when(hb, F.lit(CLS_HEARTBEAT)) if cls is None else cls.when(hb, F.lit(CLS_HEARTBEAT))
        cls = F.lit(CLS_DATA) if cls is None else cls.otherwise(F.lit(CLS_DATA))
        # __et_valid is exactly "__et_reason is null", as a plain conjunction (spark/extract.py)
        cls = F.when(F.col("__et_valid"), cls).otherwise(F.lit(CLS_INVALID))
        ensure_engine(spark)
        operator_input = df.select(
            ms.alias("et__ms"),
            cls.alias("et__cls"),
            reason.alias("et__reason"),
            F.col("__et_raw").alias("et__raw"),
            _partition_column(schema, partition_col).alias("et__part"),
            (F.col(offset_col).cast("long") if offset_col else F.lit(None).cast("long")).alias("et__off"),
            F.struct(*[F.col(c) for c in user_cols]).alias(C_REC),
            *[F.col(k).alias(f"et__k{i}") for i, k in enumerate(keys)],
            *[(F.col(a.column) if a.column else F.lit(None)).alias(f"et__a{i}") for i, a in enumerate(engine_aggs)],
        )
        tick_signal = None
        if policy.per_partition and df.isStreaming:
            # The driver's W moved: the next batch carries one tick row, which the map side sends
            # to every bucket so that each sweeps to the new W (the operator has no timers).
            from .control import control_stream

            ticks, tick_signal = control_stream(spark)
            operator_input = operator_input.unionByName(ticks.select(
                *[F.lit(None).cast(f.dataType).alias(f.name) if f.name != "et__cls" else F.lit(CLS_TICK).alias("et__cls")
                  for f in operator_input.schema.fields]))
        # the one document the operator is configured by (spark/plan.py; route reads it back from the plan)
        plan = operator_plan(config, record_type, out_schema, keys, bounded=not df.isStreaming,
                             event_time_column=settings.get("column"),
                             session_time_zone=spark.conf.get("spark.sql.session.timeZone"), split_invalid=split_invalid,
                             partition_col=partition_col, end_of_input_signal=settings.get("end_of_input_signal"),
                             tick_signal=tick_signal)
        raw = DataFrame(spark._jvm.eventtime.jvm.Engine.apply(operator_input._jdf, json.dumps(plan)), spark)
        # One projection of the operator's struct: Spark's optimizer would merge two every batch.
        out = F.col("et__out")
        cols = []
        for field in out_schema.fields:
            c = out[field.name]
            if field.name == MERGED_FROM:
                if not window.merging:
                    continue
                # epoch ms -> timestamps, like window_start / window_end
                c = F.transform(c, lambda b: F.struct(F.timestamp_millis(b["start"]).alias("start"),
                                                      F.timestamp_millis(b["end"]).alias("end"))).alias(MERGED_FROM)
            elif field.name in finish:  # a Python aggregation over the pane's values (sql_aggregates.py)
                agg, result_type = finish[field.name]
                c = F.udf(python_result(agg), result_type)(c).alias(field.name)
            elif field.name in _TS_COLUMNS:
                c = F.timestamp_millis(c).alias(field.name)
            else:
                c = c.alias(field.name)
            cols.append(c)
        result = raw.select(*cols, out[C_REC].alias(C_REC))
        if not finish:  # (Python aggregations run in this projection, so route() runs it, through toArrow)
            # route() runs the operator struct itself and splits it by kind in the tasks (Collect.java)
            result._eventtime_operator = (raw, plan["output_type"])
        return result

    return apply


def _partition_column(schema: T.StructType, partition_col: Optional[str]) -> Column:
    """The partition column as the map side reads it: integers and strings as they are (the
    engine writes Java's text of them, which is Spark's), any other type as Spark's text."""
    if partition_col is None:
        return F.lit(None).cast("string")
    if isinstance(schema[partition_col].dataType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType)):
        return F.col(partition_col)
    return F.col(partition_col).cast("string")

