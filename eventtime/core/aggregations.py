"""Aggregations over the records of a window, as create / add / merge / result functions.

Shaped like Flink's ``AggregateFunction``. Accumulators are plain Python values (numbers,
tuples, ``None``) so that engines can store them. Nulls — and NaN, which pandas cannot tell
from null — are ignored by every built-in aggregation except :func:`count`.
"""

from __future__ import annotations

import builtins
import decimal
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ._spec import spec_fields
from .contract import STRINGS
from .kinds import BUILTIN_AGGREGATIONS, COUNT, FIRST, LAST, MAX, MEAN, MIN, SQL_AGGREGATE, SUM, UDAF

__all__ = ["Aggregation", "count", "sum", "min", "max", "mean", "first", "last", "aggregate", "agg", "mean_of",
           "pane_columns", "NOT_IN_PANE"]

#: Suffixes of a pane's accumulator columns: a mean's exact sum and number of values, first /
#: last's event time of the value (epoch ms), a mergeable Spark SQL aggregation's buffer (the
#: bytes Spark writes it as). With them a pane merges with more records (reconcile).
ACC_SUM, ACC_N, ACC_MS, ACC_BUFFER = STRINGS["ACC_SUM"], STRINGS["ACC_N"], STRINGS["ACC_MS"], STRINGS["ACC_BUFFER"]
_INT64 = (-(2**63), 2**63 - 1)


class _NotInPane:
    def __repr__(self) -> str:
        return "NOT_IN_PANE"


#: What :meth:`Aggregation.from_pane` gives for a pane that does not hold the accumulator (a
#: Python or Spark SQL aggregation, a pane written before the accumulator columns, a mean whose
#: integer sum is outside bigint).
NOT_IN_PANE = _NotInPane()


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def mean_of(total: Any, n: int) -> float:
    """The mean of ``n`` values whose exact sum is ``total``, as a float (one rounding).

    Integer sums divide exactly (Python's ``int / int`` rounds once, also above 2**53),
    decimals in 100-digit precision; both engines use this rule.

    >>> mean_of(2**53 + 1, 1), mean_of(decimal.Decimal("0.1"), 3)
    (9007199254740992.0, 0.03333333333333333)
    """
    if isinstance(total, decimal.Decimal):
        with decimal.localcontext() as ctx:
            ctx.prec = 100
            return float(total / n)
    return total / n


def _exact_add(a: Any, b: Any) -> Any:
    """``a + b``; decimals in 100-digit precision (the default context rounds at 28 digits)."""
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        with decimal.localcontext() as ctx:
            ctx.prec = 100
            return a + b
    return a + b


def _check_name(value: object, parameter: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{parameter} must be a string, got {type(value).__name__} {value!r}")
    if not value:
        raise ValueError(f"{parameter} must not be empty")


@dataclass(frozen=True)
class Aggregation:
    """One aggregation: output column ``name`` computed from input ``column``.

    ``kind`` is one of ``count``, ``sum``, ``min``, ``max``, ``mean``, ``first``, ``last``,
    ``udaf`` or ``sql``. Use the factories (:func:`count`, :func:`sum`, …, :func:`aggregate`,
    :func:`agg`).

    >>> agg = sum("amount")
    >>> acc = agg.add(agg.add(agg.create(), 2, 1000), 3, 2000)
    >>> agg.result(acc)
    5
    """

    kind: str
    name: str
    column: Optional[str] = None
    _create: Optional[Callable[[], Any]] = field(default=None, repr=False, compare=False)
    _add: Optional[Callable[[Any, Any], Any]] = field(default=None, repr=False, compare=False)
    _merge: Optional[Callable[[Any, Any], Any]] = field(default=None, repr=False, compare=False)
    _result: Optional[Callable[[Any], Any]] = field(default=None, repr=False, compare=False)
    #: The Spark SQL aggregate expression of a ``sql`` aggregation (:func:`agg`).
    expression: Optional[str] = None
    #: A user-defined aggregation's result as a Spark SQL type (DDL, e.g. ``"bigint"``), for the Spark engine.
    result_type: Optional[str] = None
    #: The ``pyspark.sql.Column`` a ``sql`` aggregation was made from (``expression`` is then its display
    #: text, resolved to SQL text by window_aggregate over the input's columns).
    _column: Any = field(default=None, repr=False, compare=False)
    #: A ``sql`` aggregation whose panes carry its buffer (:func:`agg`, ``mergeable=True``).
    mergeable: bool = False

    def __post_init__(self) -> None:
        _check_name(self.kind, "kind")
        kinds = BUILTIN_AGGREGATIONS + (UDAF, SQL_AGGREGATE)
        if self.kind not in kinds:
            raise ValueError(f"kind must be one of {kinds}, got {self.kind!r}")
        _check_name(self.name, "name")
        if self.kind == SQL_AGGREGATE:
            _check_name(self.expression, "expression")
            if self.column is not None:
                raise ValueError(f"a Spark SQL aggregation reads the columns its expression names, not column={self.column!r}")
        elif self.expression is not None:
            raise ValueError(f"expression is for Spark SQL aggregations (eventtime.agg), not kind {self.kind!r}")
        elif self.kind != COUNT:
            _check_name(self.column, "column")
        if self.kind == UDAF:
            for part in ("_create", "_add", "_merge", "_result"):
                if not callable(getattr(self, part)):
                    raise TypeError(f"{part[1:]} must be callable, got {getattr(self, part)!r}")
            if self.result_type is not None:
                _check_name(self.result_type, "result_type")
        elif self.result_type is not None:
            raise ValueError(f"result_type is for user-defined aggregations (eventtime.aggregate), not kind {self.kind!r}")
        if not isinstance(self.mergeable, bool):
            raise TypeError(f"mergeable must be a bool, got {type(self.mergeable).__name__} {self.mergeable!r}")
        if self.mergeable and self.kind != SQL_AGGREGATE:
            raise ValueError(f"mergeable is for Spark SQL aggregations (eventtime.agg), not kind {self.kind!r}")

    def to_dict(self) -> dict:
        """The aggregation as the spec's object (a built-in one; :meth:`from_dict` reads it back).

        >>> sum("amount").to_dict()
        {'kind': 'sum', 'name': 'sum_amount', 'column': 'amount'}
        """
        if self.kind == UDAF:
            raise ValueError(f"aggregation {self.name!r} is user-defined (eventtime.aggregate): it has no spec, "
                             f"its functions run in Python only")
        if self.kind == SQL_AGGREGATE:
            out = {"kind": self.kind, "name": self.name, "column": None, "expression": self.expression}
            return {**out, "mergeable": True} if self.mergeable else out
        return {"kind": self.kind, "name": self.name, "column": self.column}

    @classmethod
    def from_dict(cls, data: Any) -> "Aggregation":
        """The built-in aggregation of a :meth:`to_dict` object.

        >>> Aggregation.from_dict({"kind": "count", "name": "n", "column": None})
        Aggregation(kind='count', name='n', column=None, expression=None, result_type=None, mergeable=False)
        """
        spec_fields(data, "aggregation", required=("kind", "name"), optional=("column", "expression", "mergeable"))
        if data["kind"] == UDAF:
            raise ValueError("aggregation.kind 'udaf' has no spec: a user-defined aggregation runs in Python only")
        return cls(data["kind"], data["name"], data.get("column"), expression=data.get("expression"),
                   mergeable=data.get("mergeable", False))

    def create(self) -> Any:
        if self.kind == SQL_AGGREGATE:
            raise ValueError(f"aggregation {self.name!r} ({self.expression}) is a Spark SQL aggregate: it runs on the "
                             f"Spark engine (window_aggregate), not in the reference model")
        if self.kind == COUNT:
            return 0
        if self.kind == MEAN:
            return (0, 0)
        if self.kind == UDAF:
            return self._create()
        return None

    def add(self, acc: Any, value: Any, ts_ms: int) -> Any:
        """Add one record's ``value`` (of ``column``) with event time ``ts_ms``."""
        kind = self.kind
        if kind == COUNT:
            return acc + 1
        if kind == UDAF:
            return self._add(acc, value)
        if _is_null(value):
            return acc
        return self.merge(acc, self._single(value, ts_ms))

    def _single(self, value: Any, ts_ms: int) -> Any:
        if self.kind == MEAN:
            return (value, 1)
        if self.kind in (FIRST, LAST):
            return (ts_ms, value)
        return value

    def merge(self, a: Any, b: Any) -> Any:
        kind = self.kind
        if kind == COUNT:
            return a + b
        if kind == UDAF:
            return self._merge(a, b)
        if kind == MEAN:
            return (_exact_add(a[0], b[0]), a[1] + b[1])
        if a is None:
            return b
        if b is None:
            return a
        if kind == SUM:
            return _exact_add(a, b)
        if kind in (MIN, FIRST):
            return builtins.min(a, b)
        return builtins.max(a, b)  # max, last

    def accumulator_columns(self) -> tuple[str, ...]:
        """The pane's columns that carry this aggregation's accumulator beside its value.

        >>> mean("amount").accumulator_columns(), first("url").accumulator_columns(), count().accumulator_columns()
        (('mean_amount__sum', 'mean_amount__n'), ('first_url__ms',), ())
        """
        if self.kind == MEAN:
            return (self.name + ACC_SUM, self.name + ACC_N)
        if self.kind in (FIRST, LAST):
            return (self.name + ACC_MS,)
        if self.mergeable:
            return (self.name + ACC_BUFFER,)
        return ()

    def pane_values(self, acc: Any) -> dict[str, Any]:
        """The pane's columns of this aggregation: its result and :meth:`accumulator_columns`.
        A mean's integer sum outside bigint is null (as on Spark); its record count stays.

        >>> mean("v").pane_values((7, 2))
        {'mean_v': 3.5, 'mean_v__sum': 7, 'mean_v__n': 2}
        """
        out = {self.name: self.result(acc)}
        if self.kind == MEAN:
            total, n = acc
            fits = not isinstance(total, int) or isinstance(total, bool) or _INT64[0] <= total <= _INT64[1]
            out[self.name + ACC_SUM] = total if n and fits else None
            out[self.name + ACC_N] = n
        elif self.kind in (FIRST, LAST):
            out[self.name + ACC_MS] = None if acc is None else acc[0]
        return out

    def from_pane(self, values: Mapping[str, Any]) -> Any:
        """The accumulator a pane's columns hold (:meth:`pane_values` read back), or
        :data:`NOT_IN_PANE`.

        >>> agg = first("url")
        >>> agg.from_pane({"first_url": "/a", "first_url__ms": 1000})
        (1000, '/a')
        """
        kind, value = self.kind, values.get(self.name)
        if kind in (COUNT, SUM, MIN, MAX):
            return value
        if kind == MEAN:
            n = values.get(self.name + ACC_N)
            if n is None or (n and values.get(self.name + ACC_SUM) is None):
                return NOT_IN_PANE
            return (values[self.name + ACC_SUM], n) if n else self.create()
        if kind in (FIRST, LAST):
            ms = values.get(self.name + ACC_MS)
            if value is None:
                return None
            return NOT_IN_PANE if ms is None else (ms, value)
        if self.mergeable:  # the buffer's bytes, which only Spark reads (eventtime.spark.pane_merge)
            held = values.get(self.name + ACC_BUFFER)
            return NOT_IN_PANE if held is None else bytes(held)
        return NOT_IN_PANE

    def result(self, acc: Any) -> Any:
        kind = self.kind
        if kind == UDAF:
            return self._result(acc)
        if kind == MEAN:
            return mean_of(acc[0], acc[1]) if acc[1] else None
        if kind in (FIRST, LAST):
            return None if acc is None else acc[1]
        return acc


def pane_columns(aggregations: Any) -> list[str]:
    """A pane's columns of ``aggregations``, in the engines' order: each one's result, then its
    accumulator columns.

    >>> pane_columns([count(), mean("v")])
    ['count', 'mean_v', 'mean_v__sum', 'mean_v__n']
    """
    return [name for agg in aggregations for name in (agg.name, *agg.accumulator_columns())]


def count(name: str = "count") -> Aggregation:
    """Number of records in the window.

    >>> count().name
    'count'
    """
    return Aggregation(COUNT, name)


def sum(column: str, name: Optional[str] = None) -> Aggregation:  # noqa: A001 - public API mirrors SQL
    """Sum of ``column`` (nulls ignored; ``None`` when there is no value).

    >>> sum("amount").name
    'sum_amount'
    """
    return Aggregation(SUM, name or f"sum_{column}", column)


def min(column: str, name: Optional[str] = None) -> Aggregation:  # noqa: A001
    """Smallest value of ``column``."""
    return Aggregation(MIN, name or f"min_{column}", column)


def max(column: str, name: Optional[str] = None) -> Aggregation:  # noqa: A001
    """Largest value of ``column``."""
    return Aggregation(MAX, name or f"max_{column}", column)


def mean(column: str, name: Optional[str] = None) -> Aggregation:
    """Arithmetic mean of ``column``."""
    return Aggregation(MEAN, name or f"mean_{column}", column)


def first(column: str, name: Optional[str] = None) -> Aggregation:
    """Value of ``column`` at the earliest event time (ties: the smallest value)."""
    return Aggregation(FIRST, name or f"first_{column}", column)


def last(column: str, name: Optional[str] = None) -> Aggregation:
    """Value of ``column`` at the latest event time (ties: the largest value)."""
    return Aggregation(LAST, name or f"last_{column}", column)


def aggregate(
    name: str,
    column: str,
    create: Callable[[], Any],
    add: Callable[[Any, Any], Any],
    merge: Callable[[Any, Any], Any],
    result: Callable[[Any], Any],
    result_type: Optional[str] = None,
) -> Aggregation:
    """A user-defined aggregation, like Flink's ``AggregateFunction``.

    ``add`` receives every value of ``column``, nulls included. Accumulators must be
    picklable so that engines can keep them in state; ``merge`` must be associative, and the
    result must not depend on the order of the values.

    On the Spark engine the window's values are kept in state and the functions run in Python
    over each fired pane (``create``, then ``add`` per value, then ``result``), so ``result_type``
    (the result's Spark SQL type, e.g. ``"bigint"`` or ``"array<string>"``) is needed unless
    ``result(create())`` is a bool, int, float or str that gives it (docs/usage.md, "Python
    aggregations on Spark").

    >>> distinct = aggregate("distinct_users", "user", create=frozenset,
    ...                      add=lambda acc, v: acc | {v}, merge=lambda a, b: a | b, result=len)
    >>> distinct.result(distinct.add(distinct.add(distinct.create(), "a", 0), "a", 1))
    1
    """
    return Aggregation(UDAF, name, column, create, add, merge, result, result_type=result_type)


def agg(expression: Any, name: Optional[str] = None, mergeable: bool = False) -> Aggregation:
    """A Spark SQL aggregate expression in eventtime's windows, run by the Spark engine with
    Spark's own implementation of the function: every built-in aggregate function
    (``percentile_approx(latency_ms, 0.95)``, ``approx_count_distinct(user_id)``,
    ``stddev(amount)``, ``max_by(status, event_ts)``, ``collect_set(tag)``, ...), a registered
    ``Aggregator`` / UDAF, exact ``count(DISTINCT user_id)``, ``FILTER (WHERE ...)``.
    ``expression`` is SQL text or a ``pyspark.sql.Column`` (``F.percentile_approx("latency_ms",
    0.95)``). ``name`` is the output column (default: the expression's words joined by ``_``).
    The reference model does not run these.

    ``mergeable=True``: each pane also carries the buffer as Spark writes it (``<name>__buffer``),
    so that ``eventtime.reconcile`` merges late records into it (its bytes in every pane written).

    >>> p95 = agg("percentile_approx(latency_ms, 0.95)", name="p95_latency_ms")
    >>> p95.kind, p95.expression
    ('sql', 'percentile_approx(latency_ms, 0.95)')
    >>> agg("count(DISTINCT user_id)").name
    'count_distinct_user_id'
    """
    column = None
    if _is_spark_column(expression):
        if getattr(expression, "_jc", None) is None:
            raise TypeError("expression: a Spark Connect Column cannot be resolved before the query starts; write it as "
                            "SQL text, e.g. eventtime.agg('percentile_approx(latency_ms, 0.95)')")
        column, expression = expression, expression._jc.toString()
    if not isinstance(expression, str):
        raise TypeError(f"expression must be the text of a Spark SQL aggregate expression, e.g. "
                        f"'percentile_approx(latency_ms, 0.95)', or a pyspark.sql.Column, got "
                        f"{type(expression).__name__} {expression!r}")
    if not expression.strip():
        raise ValueError("expression must not be empty")
    if name is None:
        import re

        name = "_".join(re.findall(r"[0-9A-Za-z]+", expression)).lower() or "agg"
    return Aggregation(SQL_AGGREGATE, name, None, expression=expression.strip(), _column=column, mergeable=mergeable)


def _is_spark_column(value: Any) -> bool:
    """A ``pyspark.sql.Column`` (classic or Connect), told by its class without importing Spark."""
    return any(c.__name__ == "Column" and c.__module__.startswith("pyspark.sql") for c in type(value).__mro__)
