"""``enrich_async``: the Spark adapter of the async enrichment (``mapInArrow``).

Each Python worker process keeps ONE event loop (module level, made on first use and reused
by every batch and task that runs there) and one :class:`~eventtime.enrich.engine.Enricher`
per step on it: the in-flight cap, the rate limit and the cache are per worker, and the
lookup object of the first task is kept, so a client session it opens lazily is reused.
No thread is started; a chunk's lookup is a task on the loop.

Counting (docs/enrichment.md, "How failures are counted"): the step observes ``eventtime_enrich_<output>``
(``StreamingQueryProgress.observedMetrics``: rows, failed, failed per reason, from the error
column), and its workers add their counters (requests, retries, cache hits...) to a Spark
accumulator that :class:`eventtime.route` reads after each batch into
``BatchStats.enrichment`` (hence the ``enrichment_failed`` alert).
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from typing import Any, Callable, Iterator, NamedTuple, Optional

from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..spark.extract import ENRICHMENT_FAILED_COL
from .config import FAILURE_REASONS, EnrichConfig, check_lookup
from .engine import Enricher

__all__ = ["enrich_async", "QueryEnrichment", "METRICS_PREFIX"]

#: Name prefix of the observed metric of a step (``eventtime_enrich_<output>``).
METRICS_PREFIX = "eventtime_enrich_"
# The worker function's name, as it shows in the query plan (how route finds its steps).
_FUNCTION_PREFIX = "eventtime_enrich_step_"
_KEY_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType, T.BinaryType,
              T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType, T.FloatType, T.DoubleType)

# -- in the Python workers -----------------------------------------------------------------
_LOOP: Optional[asyncio.AbstractEventLoop] = None
_LOOP_PID: Optional[int] = None
_ENRICHERS: dict = {}


def _worker_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop (a forked child makes its own)."""
    global _LOOP, _LOOP_PID
    if _LOOP is None or _LOOP_PID != os.getpid() or _LOOP.is_closed():
        _LOOP, _LOOP_PID = asyncio.new_event_loop(), os.getpid()
        _ENRICHERS.clear()
    return _LOOP


class _Step(NamedTuple):
    step_id: str
    lookup: Callable
    config: EnrichConfig
    key: str
    output: str
    error_col: str
    value_type: Any  # pyarrow type
    counts: Any  # Spark accumulator of the workers' counters


def _values_array(step: _Step, values: list, errors: list, enricher: Enricher):
    """The values as an array of the step's type; a value that does not convert is null with
    a ``bad_value`` error (``errors`` is updated)."""
    import pyarrow as pa

    try:
        return pa.array(values, type=step.value_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    kept = []
    for i, value in enumerate(values):
        try:
            pa.array([value], type=step.value_type)
            kept.append(value)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            kept.append(None)
            if errors[i] is None:
                errors[i] = f"bad_value: {type(exc).__name__}"
                enricher.stats.add_failed(errors[i])
    return pa.array(kept, type=step.value_type)


def _attach(step: _Step, batch, values: list, errors: list, enricher: Enricher):
    import pyarrow as pa

    errors = list(errors)
    array = _values_array(step, values, errors, enricher)
    return pa.RecordBatch.from_arrays(
        [*batch.columns, array, pa.array(errors, pa.string())], names=[*batch.schema.names, step.output, step.error_col])


def _run(step: _Step, batches: Iterator) -> Iterator:
    """One task's batches through the worker's enricher, in order or in completion order."""
    import pyarrow as pa

    loop = _worker_loop()
    enricher = _ENRICHERS.get(step.step_id)
    if enricher is None:
        enricher = _ENRICHERS[step.step_id] = Enricher(step.lookup, step.config)
    before = enricher.stats.as_dict()
    try:
        for batch in batches:
            keys = batch.column(batch.schema.get_field_index(step.key)).to_pylist()
            if step.config.ordered:
                values, errors = loop.run_until_complete(enricher.enrich(keys))
                yield _attach(step, batch, values, errors, enricher)
                continue
            parts = enricher.parts(keys)
            try:
                while True:
                    try:
                        part = loop.run_until_complete(parts.__anext__())
                    except StopAsyncIteration:
                        break
                    rows = batch.take(pa.array(part.indices, pa.int64()))
                    yield _attach(step, rows, part.values, part.errors, enricher)
            finally:
                loop.run_until_complete(parts.aclose())
    finally:
        after = enricher.stats.as_dict()
        step.counts.add({name: after[name] - before[name] for name in after})


# -- on the driver ---------------------------------------------------------------------------
class _Counts(AccumulatorParam):
    """Sums dicts of counters (the workers' :meth:`EnrichStats.as_dict` deltas)."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:
        for name, count in value2.items():
            value1[name] = value1.get(name, 0) + count
        return value1


# step id -> (accumulator, output column, on_failure), for route's per-batch counts
_STEPS: dict = {}


class QueryEnrichment:
    """The enrichment steps of one query's plan and their counts per batch (used by route).

    ``take()`` gives ``{output: counters}`` of what the workers did since the last call
    (:meth:`EnrichStats.as_dict` keys plus ``on_failure``)."""

    def __init__(self, df: DataFrame) -> None:
        plan = df._jdf.queryExecution().logical().toString()
        found = dict.fromkeys(re.findall(_FUNCTION_PREFIX + r"([0-9a-f]{32})", plan))
        self.steps = [step for step in found if step in _STEPS]
        self._last: dict = {}

    def __bool__(self) -> bool:
        return bool(self.steps)

    def take(self) -> dict:
        out = {}
        for step in self.steps:
            counts, output, on_failure = _STEPS[step]
            now = dict(counts.value)
            last = self._last.get(step, {})
            self._last[step] = now
            out[output] = {**{name: count - last.get(name, 0) for name, count in now.items()}, "on_failure": on_failure}
        return out


def _value_type(spark, value_type: str):
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        dtype = T._parse_datatype_string(value_type)
    except Exception as exc:  # noqa: BLE001 - Spark's parse error, re-raised naming the parameter
        raise ValueError(f"value_type must be a Spark DDL type such as 'string', 'double' or "
                         f"'struct<name:string,score:int>', got {value_type!r} ({type(exc).__name__})") from None
    zone = spark.conf.get("spark.sql.session.timeZone")
    return dtype, to_arrow_type(dtype, timezone=zone)


def enrich_async(
    lookup: Callable,
    key: str,
    output: str,
    value_type: str = "string",
    *,
    error_col: Optional[str] = None,
    chunk_size: int = 100,
    max_in_flight: int = 8,
    rate_limit: Optional[float] = None,
    timeout: Any = "5 seconds",
    retries: int = 2,
    backoff: Any = "100 milliseconds",
    max_backoff: Any = "5 seconds",
    jitter: bool = True,
    seed: Optional[int] = None,
    cache_ttl: Any = None,
    cache_max_size: Optional[int] = 100_000,
    ordered: bool = True,
    on_failure: str = "null",
) -> Callable[[DataFrame], DataFrame]:
    """A ``DataFrame.transform`` step: add column ``output`` (type ``value_type``, a Spark DDL
    string) with ``await lookup(keys)`` of column ``key``, and ``error_col`` (default
    ``<output>_error``): null when the value was found, else why not (``timeout``,
    ``lookup_error: <exception type>``, ``missing``, ``bad_result: ...``, ``bad_value: ...``).

    ``lookup`` is ``async def lookup(keys: list) -> list | dict`` (one multi-get per chunk of
    ``chunk_size`` distinct keys; the contract is in ``eventtime/enrich/engine.py``). The
    options are :class:`~eventtime.enrich.config.EnrichConfig`'s (``timeout``, ``backoff``,
    ``max_backoff`` and ``cache_ttl`` are its ``*_ms`` durations) and hold per Python worker:
    ``max_in_flight`` calls and ``rate_limit`` calls per second per worker, so the service sees
    at most that times the number of tasks running at once. A null key is not looked up (null
    value, no error). No record is dropped or held back: after the retries a failed record goes
    on with a null value; with ``on_failure="invalid"`` it is also quarantined by
    :func:`eventtime.with_event_time` (reason ``enrichment_failed``), so apply this step
    BEFORE ``with_event_time``. ``ordered=False`` lets a batch's rows leave as their chunk
    completes; event time and the watermark are not affected.

    >>> async def profile(user_ids):  # one request for the whole chunk
    ...     async with session.post(url, json=user_ids) as response:  # doctest: +SKIP
    ...         return await response.json()  # {user_id: profile}
    >>> events = raw.transform(eventtime.enrich_async(profile, key="user_id", output="profile",
    ...     value_type="struct<name:string,tier:int>", max_in_flight=4, rate_limit=200, timeout="500 ms",
    ...     cache_ttl="5 minutes", on_failure="invalid")).transform(eventtime.with_event_time("ts"))  # doctest: +SKIP
    """
    check_lookup(lookup)
    for name, value in (("key", key), ("output", output), ("value_type", value_type)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
        if not value.strip():
            raise ValueError(f"{name} must not be empty, got {value!r}")
    error_col = f"{output}_error" if error_col is None else error_col
    if not isinstance(error_col, str) or not error_col.strip():
        raise TypeError(f"error_col must be a non-empty str or None, got {error_col!r}")
    for name, value in (("output", output), ("error_col", error_col)):
        if value.startswith("__et_"):
            raise ValueError(f"{name} must not start with '__et_' (eventtime's internal columns), got {value!r}")
    if error_col == output:
        raise ValueError(f"error_col must differ from output, both are {output!r}")
    config = EnrichConfig(
        chunk_size=chunk_size, max_in_flight=max_in_flight, rate_limit=rate_limit, timeout_ms=timeout, retries=retries,
        backoff_ms=backoff, max_backoff_ms=max_backoff, jitter=jitter, seed=seed, cache_ttl_ms=cache_ttl,
        cache_max_size=cache_max_size, ordered=ordered, on_failure=on_failure)
    step_id = uuid.uuid4().hex

    def apply(df: DataFrame) -> DataFrame:
        from ..spark.connect import require_classic

        require_classic(df, "enrich_async")
        if "__et_ms" in df.columns:
            raise ValueError(
                "enrich_async must be applied BEFORE with_event_time (the enrichment would drop the event-time "
                "column's settings and watermark, and on_failure='invalid' is read by with_event_time): "
                "df.transform(eventtime.enrich_async(...)).transform(eventtime.with_event_time(...))")
        if key not in df.columns:
            raise ValueError(f"enrich_async: key column {key!r} not found; columns: {df.columns}")
        for name, column in (("output", output), ("error_col", error_col)):
            if column in df.columns:
                raise ValueError(f"enrich_async: {name} column {column!r} already exists; columns: {df.columns}")
        key_type = df.schema[key].dataType
        if not isinstance(key_type, _KEY_TYPES):
            raise TypeError(f"enrich_async: key column {key!r} must be of an atomic type (string, integer, date...), "
                            f"got {key_type.simpleString()}")
        spark = df.sparkSession
        dtype, arrow_type = _value_type(spark, value_type)
        counts = spark.sparkContext.accumulator({}, _Counts())
        _STEPS[step_id] = (counts, output, on_failure)
        step = _Step(step_id, lookup, config, key, output, error_col, arrow_type, counts)

        def run(batches: Iterator) -> Iterator:
            return _run(step, batches)

        run.__name__ = run.__qualname__ = _FUNCTION_PREFIX + step_id
        schema = T.StructType([*df.schema.fields, T.StructField(output, dtype, True), T.StructField(error_col, T.StringType(), True)])
        out = df.mapInArrow(run, schema)
        error = F.col(error_col)
        out = out.observe(
            METRICS_PREFIX + output,
            F.count(F.lit(1)).alias("rows"),
            F.count(error).alias("failed"),
            *[F.count(F.when(error.startswith(reason), 1)).alias(reason) for reason in FAILURE_REASONS],
        )
        if config.on_failure == "invalid":
            marker = F.when(error.isNotNull(), F.concat(F.lit(f"{output}: "), error))
            if ENRICHMENT_FAILED_COL in out.columns:  # an earlier step's failure stays first
                marker = F.coalesce(F.col(ENRICHMENT_FAILED_COL), marker)
            out = out.withColumn(ENRICHMENT_FAILED_COL, marker)
        return out

    return apply
