"""End of input for a streaming query: a tiny control stream beside the user's source.

Spark gives a stateful operator no signal that a bounded input (``availableNow``, a
backfill) has ended, so windows that are not yet due would never fire. Every streaming plan of
:func:`eventtime.with_event_time` therefore unions its input with this control stream (a
Python data source, ``format("eventtime_control")``) before the watermark. It is empty until
:meth:`eventtime.Router.start` with ``end_of_input=True`` has drained the input and raises the
signal; the next micro-batch then carries one row whose event time moves the watermark to
``END_OF_INPUT_MS``, every key's event-time timer fires, and each key fires and purges all its
windows (docs/semantics.md, "End of input"). The row itself stops before the operator.

The signal is a file on the driver (only the driver-side reader reads it).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

__all__ = ["CONTROL_FORMAT", "control_stream", "raise_end_of_input"]

CONTROL_FORMAT = "eventtime_control"


def _signal(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


class _ControlReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offset ``{"signal": n}``: n grows by one each time end of input is raised."""

    def __init__(self, options: dict) -> None:
        self.path = options["signal_path"]
        self.target = None

    def initialOffset(self) -> dict:
        return {"signal": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = _signal(self.path)

    def latestOffset(self, start: dict, limit) -> dict:
        current = _signal(self.path) if self.target is None else self.target
        # Never behind the checkpointed offset (a restarted driver has a new, empty signal file).
        return {"signal": max(int(start["signal"]), current)}

    def partitions(self, start: dict, end: dict) -> list:
        return [InputPartition(0)] if int(end["signal"]) > int(start["signal"]) else []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        yield (1,)

    def commit(self, end: dict) -> None:
        pass


class _ControlSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return CONTROL_FORMAT

    def schema(self) -> str:
        return "signal long"

    def streamReader(self, schema) -> DataSourceStreamReader:
        return _ControlReader(self.options)


def control_stream(spark):
    """(streaming DataFrame of end-of-input signals, path of its signal file)."""
    spark.dataSource.register(_ControlSource)
    path = os.path.join(tempfile.gettempdir(), f"eventtime-control-{uuid.uuid4().hex}")
    df = spark.readStream.format(CONTROL_FORMAT).option("signal_path", path).load()
    return df, path


def raise_end_of_input(path: str) -> None:
    """Make the control stream deliver one more end-of-input row."""
    value = _signal(path) + 1
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(str(value))
    os.replace(tmp, path)
