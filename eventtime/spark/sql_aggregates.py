"""The aggregations the JVM operator runs, as the Spark engine sees the user's: Spark SQL ones
(:func:`eventtime.agg`, text or a ``Column``) resolved and typed exactly as the operator
resolves them (``eventtime.jvm.spark.SqlAggregate``), and Python ones (:func:`eventtime.aggregate`)
as the window's values kept in state, finished in Python over each fired pane. All on the
driver, before the query starts."""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

from pyspark.sql import types as T

from ..core.aggregations import Aggregation
from ..core.kinds import SQL_AGGREGATE, UDAF
from .engine import ensure_engine

__all__ = ["engine_aggregations", "python_result", "result_ddl"]

# a Python aggregation's result type when result(create()) is one of these (and result_type is not given)
_INFERRED = ((bool, "boolean"), (int, "bigint"), (float, "double"), (str, "string"))


def _quote(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _values_expression(agg: Aggregation) -> str:
    """The window's values of a Python aggregation, nulls included (a struct is never null)."""
    return f"collect_list(struct({_quote(agg.column)} AS v))"


def _refused(i: int, agg: Aggregation, expression: str, exc: Exception, record_type: T.StructType) -> ValueError:
    reason = (exc.getMessage() if hasattr(exc, "getMessage") else "") or str(exc) or type(exc).__name__
    return ValueError(f"window_aggregate: aggregations[{i}] ({agg.name!r}) cannot run {expression!r}: "
                      f"{reason.splitlines()[0]} (the input's columns: {', '.join(record_type.names)})")


def result_ddl(i: int, agg: Aggregation) -> str:
    """The Spark SQL type (DDL) of Python aggregation ``aggregations[i]``'s result: its
    ``result_type``, or the type of ``result(create())`` when that is a bool, int, float or str."""
    if agg.result_type is not None:
        return agg.result_type
    try:
        empty = agg.result(agg.create())
    except Exception as exc:
        empty = exc
    for python, ddl in _INFERRED:
        if type(empty) is python:
            return ddl
    raise ValueError(
        f"window_aggregate: aggregations[{i}] ({agg.name!r}) is a Python aggregation: the Spark engine needs the Spark "
        f"type of its result, and result(create()) gives {empty!r}; pass it to eventtime.aggregate(..., "
        f"result_type='bigint') (any Spark SQL type, e.g. 'double', 'array<string>', 'decimal(20,2)')")


def _result_type(i: int, agg: Aggregation) -> T.DataType:
    from pyspark.sql.types import _parse_datatype_string

    ddl = result_ddl(i, agg)
    try:
        return _parse_datatype_string(ddl)
    except Exception as exc:
        raise ValueError(f"window_aggregate: aggregations[{i}] ({agg.name!r}): result_type {ddl!r} is "
                         f"not a Spark SQL type ({str(exc).splitlines()[0]})") from None


@contextlib.contextmanager
def _spark_error_lines_off() -> Iterator[None]:
    """PySpark's own ERROR line of an analysis error (the JVM's whole message and stack as JSON,
    about 9 KB) left out while the error is refused here in a few lines of its own."""
    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(name) for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, before):
            logger.disabled = disabled


def engine_aggregations(spark, record_type: T.StructType, aggregations: Sequence[Aggregation]) -> tuple:
    """``(aggregations, types, finish)``: the aggregations as the JVM operator runs them (a
    ``Column`` resolved to its SQL text; a Python one as ``collect_list`` of its values), the
    operator's type of each Spark SQL one, and per Python aggregation ``name: (aggregation,
    result type)``."""
    engine, types, finish = [], {}, {}
    for i, agg in enumerate(aggregations):
        if agg.kind == UDAF:
            finish[agg.name] = (agg, _result_type(i, agg))
            agg = Aggregation(SQL_AGGREGATE, agg.name, expression=_values_expression(agg))
        elif agg.kind == SQL_AGGREGATE and agg._column is not None:
            ensure_engine(spark)
            try:
                with _spark_error_lines_off():
                    text = spark._jvm.eventtime.jvm.spark.SqlAggregate.sqlOf(
                        agg._column._jc, spark._jsparkSession.parseDataType(record_type.json()))
            except Exception as exc:
                raise _refused(i, agg, agg.expression, exc, record_type) from None
            agg = Aggregation(SQL_AGGREGATE, agg.name, expression=text, mergeable=agg.mergeable)
        engine.append(agg)
        if agg.kind != SQL_AGGREGATE:
            continue
        ensure_engine(spark)
        try:
            with _spark_error_lines_off():
                resolved = spark._jvm.eventtime.jvm.spark.SqlAggregate.of(
                    agg.expression, spark._jsparkSession.parseDataType(record_type.json()))
        except Exception as exc:  # AnalysisException, ParseException, IllegalArgumentException
            raise _refused(i, agg, aggregations[i].expression or agg.expression, exc, record_type) from None
        types[agg.name] = T._parse_datatype_json_string(resolved.resultTypeJson())
    return tuple(engine), types, finish


def python_result(agg: Aggregation):
    """The function of a pane's values (rows of one field ``v``, as Spark gives them to Python)
    to ``agg``'s result over them: ``create``, ``add`` per value, ``result``; ``None`` on a row
    that is not a pane."""

    def result(values):
        if values is None:
            return None
        acc = agg.create()
        for row in values:
            acc = agg.add(acc, row[0], 0)  # a user-defined aggregation does not read the event time
        return agg.result(acc)

    return result
