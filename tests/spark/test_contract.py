"""The contract between Python and the JVM engine is written once (eventtime/contract.json):
the engine's generated ``Contract`` class and the Python constants both carry it, and no Java
source writes one of its values by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import eventtime
from eventtime.core import kinds, timestamps, trigger, watermark, window
from eventtime.core.contract import CONTRACT_PATH, INTS, LONGS, STRINGS

pytestmark = pytest.mark.spark
JAVA = Path(eventtime.__file__).parent / "spark" / "engine"


def test_the_engines_contract_class_is_the_json(spark):
    contract = spark._jvm.eventtime.jvm.plan.Contract
    assert {name: getattr(contract, name) for name in STRINGS} == STRINGS
    assert {name: getattr(contract, name) for name in INTS} == INTS
    assert {name: getattr(contract, name) for name in LONGS} == LONGS
    assert STRINGS == json.loads(CONTRACT_PATH.read_text())["strings"]


def test_python_reads_its_constants_from_the_contract():
    assert (kinds.PANE, kinds.LATE_RECORD, kinds.INVALID_RECORD, kinds.PARTITION_STATS) == tuple(
        STRINGS[n] for n in ("PANE", "LATE_RECORD", "INVALID_RECORD", "PARTITION_STATS"))
    assert (trigger.ON_TIME, trigger.LATE, trigger.FINAL, trigger.FINAL_ONLY, trigger.DISCARDING) == tuple(
        STRINGS[n] for n in ("ON_TIME", "LATE", "FINAL", "FINAL_ONLY", "DISCARDING"))
    assert trigger.END_OF_INPUT_MS == LONGS["END_OF_INPUT_MS"] and timestamps.TOO_LATE == STRINGS["TOO_LATE"]
    assert (watermark.GLOBAL, watermark.PER_PARTITION) == (STRINGS["GLOBAL"], STRINGS["PER_PARTITION"])
    assert {cls.TYPE for cls in (window.Tumbling, window.Sliding, window.Calendar, window.Session)} == {
        STRINGS[n] for n in STRINGS if n.startswith("WINDOW_")}
    assert window.CALENDAR_UNITS == tuple(STRINGS[n] for n in ("UNIT_DAY", "UNIT_WEEK", "UNIT_MONTH"))
    assert {*kinds.BUILTIN_AGGREGATIONS, kinds.SQL_AGGREGATE} == {STRINGS[n] for n in STRINGS if n.startswith("AGG_")}


def _code(text: str) -> str:
    """Java source without its comments."""
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def test_no_java_source_writes_a_contract_value_by_hand():
    literals = {json.dumps(v) for v in STRINGS.values()} | {str(v) for v in LONGS.values()} | \
        {f"{v:_}" for v in LONGS.values()}
    found = []
    for path in JAVA.rglob("*.java"):
        code = _code(path.read_text())
        found += [(path.name, lit) for lit in literals if lit in code]
    assert not found, f"contract values written by hand (use eventtime.jvm.plan.Contract): {found}"


def test_the_operator_finds_every_output_column_where_python_puts_it(spark):
    """Layout.java reads the output positions by name from the schema Python defines
    (spark/aggregate.py output_schema): a column Python adds or moves cannot be missed."""
    from pyspark.sql import types as T

    from eventtime.core.config import EngineConfig
    from eventtime.spark.aggregate import C_REC, output_schema
    from eventtime.spark.plan import operator_plan

    window = eventtime.Tumbling("1 minute")
    aggs = (eventtime.count(), eventtime.sum("v"), eventtime.mean("v"), eventtime.first("v"))
    record = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType())])
    pane = {"count": "count", "sum_v": "sum_v", "mean_v": "mean_v", "mean_v/a": "mean_v__sum", "mean_v/b": "mean_v__n",
            "first_v": "first_v", "first_v/a": "first_v__ms"}
    out = output_schema([record["k"]], [T.StructField(name, T.LongType()) for name in dict.fromkeys(pane.values())])
    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(operator_plan(EngineConfig(window, aggs), record, out, ["k"],
                                                                bounded=False)))
    positions = json.loads(spark._jvm.eventtime.jvm.operator.InProcess.outputPositions(spec))
    names = [*out.names, C_REC]
    assert positions.pop("width") == len(names)
    assert {p: positions.pop(p) for p in pane} == {p: names.index(column) for p, column in pane.items()}
    assert positions == {name: names.index(name) for name in names if name not in ("kind", "k", *pane.values())}


@pytest.mark.parametrize("bound_ms", [0, 1, 10_000, 86_400_000])
def test_the_running_maximum_is_one_rule_in_both_languages(spark, bound_ms):
    """``W + B`` (the largest valid event time of the batches before, which the delay histograms
    measure behind): Spec.runningMax and core/watermark.py's running_max_ms, at the edges (no
    watermark yet, the first ms, the end of input and just before it)."""
    import datetime as dt

    from pyspark.sql import types as T

    from eventtime.core.config import EngineConfig
    from eventtime.spark.aggregate import output_schema
    from eventtime.spark.plan import operator_plan

    config = EngineConfig(eventtime.Tumbling("1 minute"), (eventtime.count(),),
                          max_out_of_orderness_ms=dt.timedelta(milliseconds=bound_ms))
    record = T.StructType([T.StructField("k", T.StringType())])
    out = output_schema([record["k"]], [T.StructField("count", T.LongType())])
    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(operator_plan(config, record, out, ["k"], bounded=False)))
    end = LONGS["END_OF_INPUT_MS"]
    for w in (-1, 0, 1, 59_999, 1_700_000_000_000, end - 1, end):
        assert spec.runningMax(w) == watermark.running_max_ms(w, bound_ms), w


def test_the_output_columns_are_named_once():
    """The operator's output columns: Python's output schema takes them from the contract, and
    Layout.java finds them through the generated Contract, never by a name typed again."""
    from eventtime.core.contract import COLUMNS
    from eventtime.spark.output import OUTPUT_FIXED

    assert [name for name, _ in OUTPUT_FIXED] == list(COLUMNS)
    code = _code((JAVA / "src" / "eventtime" / "jvm" / "plan" / "Layout.java").read_text())
    assert not [name for name in COLUMNS if json.dumps(name) in code]
    assert "Contract.COL_WATERMARK" in code and "Contract.RECORD_COLUMN" in code
