"""The operator's plan: the one document that configures the JVM operator.

``window_aggregate`` builds it once (:func:`operator_plan`) and hands it to the engine, which
reads it once (``Spec.java``) and keeps it in its plan node; :func:`eventtime.route` reads it
back from the DataFrame's plan (:func:`plan_of`), and the checkpoint's fingerprint is derived
from it (``ops/compat.py``). Its schema is ``eventtime/plan.schema.json``, its version
``contract.json``'s ``PLAN_VERSION``. A batch's watermark travels to the tasks in one declared
form beside it (:func:`batch_watermark`).
"""

from __future__ import annotations

import json
from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..core.config import EngineConfig
from ..core.contract import INTS
from .output import C_REC, INTEGRAL_TYPES

__all__ = ["PLAN_VERSION", "STATE_LAYOUT", "NUM_BUCKETS", "WATERMARK_PROPERTY", "operator_plan", "plan_of",
           "batch_watermark", "pipeline_document"]

PLAN_VERSION = INTS["PLAN_VERSION"]
# How the checkpoint's state is laid out, stored in its fingerprint beside the configuration
# (ops/compat.py names what each layout changed); a checkpoint of another layout is refused on
# start unless its state is the same.
STATE_LAYOUT = 6
# The operator's grouping key is a hash bucket of the user key (state is per user key inside
# it, see WindowOperator.java); fixed, as a checkpoint's state is laid out by it.
NUM_BUCKETS = 32
# The Spark local property through which the driver tells the map side a batch's watermark.
WATERMARK_PROPERTY = "eventtime.watermark"


def operator_plan(
    config: EngineConfig,
    record_type: T.StructType,
    out_schema: T.StructType,
    keys: Sequence[str],
    bounded: bool,
    event_time_column: Optional[str] = None,
    session_time_zone: str = "UTC",
    split_invalid: bool = False,
    partition_col: Optional[str] = None,
    end_of_input_signal: Optional[str] = None,
    tick_signal: Optional[str] = None,
) -> dict:
    """The plan of an operator over rows of ``record_type`` (eventtime/plan.schema.json):
    ``config`` (:meth:`EngineConfig.to_spec`), the key columns, where the engine reads the key
    and aggregated columns and of which type, the output type, and how the query runs.

    ``event_time_column``: the record's column a late record's ``raw_timestamp`` is Spark's text
    of (in ``session_time_zone``), when the event time is one of the record's columns."""
    position = {f.name: i for i, f in enumerate(record_type.fields)}
    spec = config.to_spec()

    def read(agg: dict) -> dict:
        dtype = record_type[agg["column"]].dataType if agg["column"] else None
        return {
            "field": position[agg["column"]] if agg["column"] else -1,
            "integral": isinstance(dtype, INTEGRAL_TYPES),
            "decimal": isinstance(dtype, T.DecimalType),
            "scale": dtype.scale if isinstance(dtype, T.DecimalType) else 0,
            "mergeable": bool(agg.get("mergeable", False)),
        }

    return {
        "version": PLAN_VERSION,
        "config": spec,
        "keys": list(keys),
        "partition_col": partition_col,
        "input": {
            "record_type": record_type.json(),
            "key_fields": [position[k] for k in keys],
            "aggregations": [read(a) for a in spec["aggregations"]],
            "event_time_field": position.get(event_time_column, -1) if event_time_column else -1,
            "session_time_zone": session_time_zone,
        },
        "output_type": T.StructType([*out_schema.fields, T.StructField(C_REC, record_type)]).json(),
        "run": {
            "bounded": bounded,
            "split_invalid": split_invalid,
            "buckets": NUM_BUCKETS,
            "state_layout": STATE_LAYOUT,
            "watermark_property": WATERMARK_PROPERTY,
            "end_of_input_signal": end_of_input_signal,
            "tick_signal": tick_signal,
        },
    }


def plan_of(df: DataFrame) -> dict:
    """The plan of the one operator in ``df``'s Spark plan (the output of ``window_aggregate``,
    filtered or projected as the user likes); ``ValueError`` when there is none or more than one."""
    found = list(df.sparkSession._jvm.eventtime.jvm.Engine.plansOf(df._jdf))
    if len(found) != 1:
        raise ValueError(
            "route() expects the output of eventtime.window_aggregate(...)"
            + (": its plan has no eventtime operator" if not found else
               f": its plan has {len(found)} eventtime operators (a union of pipelines?); route each on its own"))
    plan = json.loads(found[0])
    if plan.get("version") != PLAN_VERSION:
        raise ValueError(f"the eventtime operator's plan has version {plan.get('version')!r}; this eventtime reads "
                         f"version {PLAN_VERSION}")
    return plan


def batch_watermark(query_id: str, batch_id: int, watermark_ms: int, running_max_ms: Optional[int]) -> str:
    """A batch's watermark as the tasks read it (plan.schema.json, ``batch_watermark``).

    >>> batch_watermark("q", 3, 60000, 70000)
    '{"query_id": "q", "batch_id": 3, "watermark_ms": 60000, "running_max_ms": 70000}'
    """
    return json.dumps({"query_id": query_id, "batch_id": batch_id, "watermark_ms": watermark_ms,
                       "running_max_ms": running_max_ms})


def pipeline_document(plan: dict) -> dict:
    """What the sinks record in their tables for ``eventtime late reconcile``: the config, the
    keys, and the record's type when a mergeable Spark SQL aggregation reads it."""
    document = {"config": plan["config"], "keys": plan["keys"]}
    if any(a["mergeable"] for a in plan["input"]["aggregations"]):
        document["record_type"] = plan["input"]["record_type"]
    return document
