"""route(): sinks and alerters that could only fail inside the running query are refused at once."""

from __future__ import annotations

import pytest

import eventtime
from eventtime.ops.alerts import Alerter
from eventtime.sinks import DeltaLateSink, DeltaResultsSink

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def out(spark):
    events = spark.createDataFrame([], "user_id string, ts bigint").transform(eventtime.with_event_time("ts", unit="ms"))
    return events.transform(eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute")))


def test_a_sink_class_instead_of_a_sink_is_refused(out):
    """A class is callable: DeltaResultsSink(table, batch_id, query_id) failed at the first batch."""
    with pytest.raises(TypeError, match=r"^route: panes must be a sink object, got the class DeltaResultsSink; "
                                        r"make one first, e.g. panes=DeltaResultsSink\(path, pipeline=\.\.\.\)$"):
        eventtime.route(out, panes=DeltaResultsSink)
    with pytest.raises(TypeError, match=r"^route: invalid must be a sink object, got the class DeltaLateSink"):
        eventtime.route(out, panes=lambda *a: None, invalid=DeltaLateSink)


def test_a_sink_that_cannot_take_table_batch_id_and_query_id_is_refused(out):
    def write(table):
        pass

    with pytest.raises(TypeError, match=r"^route: late must be callable as late\(table, batch_id, query_id\), but "
                                        r"<function .*write at .*> takes the arguments \(table\)$"):
        eventtime.route(out, late=write)
    # what the contract allows: three positional arguments, *args, defaults
    eventtime.route(out, panes=lambda table, batch_id, query_id, retries=3: None, late=lambda *a: None)


def test_an_alerter_class_or_an_on_batch_of_the_wrong_shape_is_refused(out):
    """Alerter.on_batch exists on the class too: route(alerter=Alerter) failed (logged) at every batch."""
    sink = lambda *a: None  # noqa: E731
    with pytest.raises(TypeError, match=r"^route: alerter must have on_batch\(batch_id, records, stats\): an object "
                                        r"such as eventtime\.Alerter\(pipeline=\.\.\.\), got <class 'eventtime\.ops\.alerts\.Alerter'>$"):
        eventtime.route(out, panes=sink, alerter=Alerter)

    class Counting:
        def on_batch(self, records):
            pass

    with pytest.raises(TypeError, match=r"^route: alerter\.on_batch must be callable as on_batch\(batch_id, records, "
                                        r"stats\), but it takes the arguments \(records\)$"):
        eventtime.route(out, panes=sink, alerter=Counting())
