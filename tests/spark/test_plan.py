"""The operator's plan is one versioned document (eventtime/plan.schema.json): Python builds it
once, the engine reads it once and refuses another version or a missing field, route reads it
back from the DataFrame's plan, and the checkpoint's fingerprint is derived from it."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import eventtime
from eventtime import Calendar, EngineConfig, Session, Sliding, Tumbling
from eventtime.core.contract import INTS, PLAN_SCHEMA_PATH
from eventtime.ops.compat import plan_fingerprint, state_fingerprint
from eventtime.spark.aggregate import output_schema
from eventtime.spark.output import agg_type
from eventtime.spark.plan import NUM_BUCKETS, PLAN_VERSION, STATE_LAYOUT, batch_watermark, operator_plan, pipeline_document

SCHEMA = json.loads(PLAN_SCHEMA_PATH.read_text())
RECORD = T.StructType([T.StructField("key", T.StringType()), T.StructField("ts", T.LongType()),
                       T.StructField("amount", T.DecimalType(12, 2)), T.StructField("n", T.IntegerType())])
WINDOWS = [Tumbling("1 minute", offset="5 seconds"), Sliding("1 minute", "20 seconds"), Calendar("day", tz="UTC+8"),
           Calendar("week", tz="Europe/Berlin", week_start="sunday"), Calendar("month", tz="UTC"), Session("30 seconds")]


def _plan(window, aggs=(eventtime.count(), eventtime.sum("amount"), eventtime.mean("n")), **options) -> dict:
    config = EngineConfig(window, tuple(aggs), max_out_of_orderness_ms=5_000, allowed_lateness_ms=60_000,
                          watermark=options.pop("watermark", "global"))
    out = output_schema([RECORD["key"]], [T.StructField(a.name, agg_type(a, RECORD)) for a in aggs])
    return operator_plan(config, RECORD, out, ["key"], bounded=False, event_time_column="ts", **options)


def test_the_schemas_version_is_the_contracts():
    assert SCHEMA["properties"]["version"]["const"] == INTS["PLAN_VERSION"] == PLAN_VERSION


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: repr(w)[:40])
def test_every_window_kinds_plan_follows_the_schema(window):
    plan = _plan(window, partition_col="p", end_of_input_signal="/tmp/end", tick_signal="/tmp/tick")
    jsonschema.validate(plan, SCHEMA)
    assert plan["config"] == EngineConfig.from_spec(plan["config"]).to_spec()  # the config reads back whole


def test_a_plan_with_every_aggregation_kind_and_per_partition_watermarks_follows_the_schema():
    aggs = (eventtime.count(), eventtime.sum("n"), eventtime.mean("amount"), eventtime.min("key"), eventtime.max("ts"),
            eventtime.first("n"), eventtime.last("n"))
    plan = _plan(Tumbling("1 minute"), aggs, watermark="per_partition")
    jsonschema.validate(plan, SCHEMA)
    assert [a["field"] for a in plan["input"]["aggregations"]] == [-1, 3, 2, 0, 1, 3, 3]
    assert [a["decimal"] for a in plan["input"]["aggregations"]][2] and plan["input"]["aggregations"][2]["scale"] == 2


def test_a_plan_missing_a_field_or_with_an_unknown_one_does_not_follow_the_schema():
    plan = _plan(Tumbling("1 minute"))
    for broken in ({k: v for k, v in plan.items() if k != "run"},
                   {**plan, "config": {k: v for k, v in plan["config"].items() if k != "report_partly_late"}},
                   {**plan, "extra": 1}, {**plan, "version": PLAN_VERSION + 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SCHEMA)


def test_the_batch_watermark_follows_its_declared_form():
    for value in (batch_watermark("q", 3, 60_000, 70_000), batch_watermark("q", 0, 0, None)):
        jsonschema.validate(json.loads(value), {**SCHEMA["$defs"]["batch_watermark"], "$defs": SCHEMA["$defs"]})


def test_the_fingerprint_is_derived_from_the_plan_in_the_shape_checkpoints_store():
    plan = _plan(Sliding("1 minute", "20 seconds"), watermark="per_partition")
    config = EngineConfig.from_spec(plan["config"])
    assert plan_fingerprint(plan) == {**state_fingerprint(config, ["key"]), "layout": STATE_LAYOUT, "buckets": NUM_BUCKETS}


def test_the_pipeline_document_carries_the_record_type_only_for_a_mergeable_aggregation():
    plan = _plan(Tumbling("1 minute"))
    assert pipeline_document(plan) == {"config": plan["config"], "keys": ["key"]}


@pytest.mark.spark
def test_the_engine_reads_the_plan_and_refuses_another_version_or_a_missing_field(spark):
    plan = _plan(Calendar("week", tz="Europe/Berlin", week_start="sunday"))
    from py4j.java_gateway import get_field

    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(plan))
    assert [get_field(spec, f) for f in ("session", "latenessMs", "maxOutOfOrdernessMs", "buckets")] == [
        False, 60_000, 5_000, NUM_BUCKETS]
    assert json.loads(get_field(spec, "json")) == plan

    for broken, named in (({**plan, "version": PLAN_VERSION + 1}, f"has version {PLAN_VERSION + 1}"),
                          ({**plan, "run": {k: v for k, v in plan["run"].items() if k != "split_invalid"}},
                           "lacks run.split_invalid"),
                          ({**plan, "config": {**plan["config"], "window": {"type": "calendar", "unit": "week", "tz": "UTC"}}},
                           "lacks config.window.week_start")):
        with pytest.raises(Exception, match=named):  # pyspark converts the JVM IllegalArgumentException
            spark._jvm.eventtime.jvm.plan.Spec(json.dumps(broken))


@pytest.mark.spark
def test_the_tasks_read_the_batch_watermark_only_for_their_query_and_batch(spark):
    read = spark._jvm.eventtime.jvm.plan.PublishedWatermark.read
    assert list(read(batch_watermark("q1", 3, 60_000, 70_000), "q1", "3")) == [60_000, 70_000]
    assert list(read(batch_watermark("q1", 3, 60_000, None), "q1", "3")) == [60_000, None]
    assert read(batch_watermark("q1", 3, 60_000, 70_000), "q2", "3") is None
    assert read(batch_watermark("q1", 3, 60_000, 70_000), "q1", "4") is None


@pytest.mark.spark
def test_route_reads_the_plan_back_from_the_dataframe_it_is_given(spark, tmp_path):
    df = spark.createDataFrame([("a", 1_000), ("b", 2_000)], "key string, ts long")
    out = df.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="7 seconds")).transform(
        eventtime.window_aggregate(keys=["key"], window=Tumbling("1 minute"), allowed_lateness="1 minute"))
    router = eventtime.Router(out.filter(F.col("kind") == "pane").select("*"), panes=lambda table, batch_id, query_id: None)
    assert router.config.max_out_of_orderness_ms == 7_000 and router.config.allowed_lateness_ms == 60_000
    assert router.plan["keys"] == ["key"] and router.plan["version"] == PLAN_VERSION
    with pytest.raises(ValueError, match="has 2 eventtime operators"):
        eventtime.Router(out.unionByName(out), panes=lambda table, batch_id, query_id: None)
    with pytest.raises(ValueError, match="no eventtime operator"):
        eventtime.Router(spark.createDataFrame([("pane",)], "kind string"), panes=lambda table, batch_id, query_id: None)
