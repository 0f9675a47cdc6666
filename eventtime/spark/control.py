"""End of input for a streaming query: a tiny control stream beside the user's source.

Spark gives a stateful operator no signal that a bounded input (``availableNow``, a
backfill) has ended, so windows that are not yet due would never fire. Every streaming plan of
:func:`eventtime.with_event_time` therefore unions its input with this control stream (a JVM
source of the engine jar, ``eventtime.jvm.spark.ControlSource``) before the watermark. It is empty
until :meth:`eventtime.Router.start` with ``end_of_input=True`` has drained the input and
raises the signal; the next micro-batch then carries one row whose event time moves the
watermark to ``END_OF_INPUT_MS``, every key's event-time timer fires, and each key fires and
purges all its windows (docs/semantics.md, "End of input"). The row itself stops before the
operator.

The signal is a file on the driver holding a count (only the driver reads it). Its offsets,
``{"signal": n}``, are those of the Python data source this replaced, so a checkpoint written
by either resumes with the other.
"""

from __future__ import annotations

import os
import tempfile
import uuid

__all__ = ["read_signal", "write_signal", "CONTROL_FORMAT", "control_stream", "raise_end_of_input"]

CONTROL_FORMAT = "eventtime.jvm.spark.ControlSource"


def read_signal(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def control_stream(spark):
    """(streaming DataFrame of end-of-input signals, path of its signal file)."""
    from .engine import ensure_engine

    ensure_engine(spark)
    path = os.path.join(tempfile.gettempdir(), f"eventtime-control-{uuid.uuid4().hex}")
    df = spark.readStream.format(CONTROL_FORMAT).option("signal_path", path).load()
    return df, path


def write_signal(path: str, value: int) -> None:
    """Set a control stream's signal count (atomically: the source never reads half a file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(str(value))
    os.replace(tmp, path)


def raise_end_of_input(path: str) -> None:
    """Make the control stream deliver one more end-of-input row."""
    write_signal(path, read_signal(path) + 1)
