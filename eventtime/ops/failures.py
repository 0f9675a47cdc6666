"""Short, actionable descriptions of failed streaming queries, from their text alone (no
Spark import: the alerter reads them too).

A query that fails inside ``foreachBatch`` reports a Python traceback around a Java stack
around the real cause; the Spark error class that says what happened (e.g.
``CANNOT_LOAD_STATE_STORE``) sits deep inside it.
"""

from __future__ import annotations

import os
import re
from typing import Optional

__all__ = ["QueryFailedError", "describe_failure", "failure_origin", "short_failure", "write_failure_trace"]

# Error classes that only say "the failure happened in there", never what it was.
_WRAPPERS = {"FOREACH_BATCH_USER_FUNCTION_ERROR", "STREAM_FAILED"}
_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\] ([^\n]*)")
_CAUSE = re.compile(r"Caused by: ([\w.$]+(?:Exception|Error)[^\n]*)")
# A Python exception raised in foreachBatch ends its traceback with "module.Class: message".
_PYTHON = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.M)
_JVM_PREFIXES = ("py4j.", "java.", "javax.", "org.", "scala.", "com.")
# The exception line that ends a Python traceback, whatever the class is called.
_TRACEBACK_END = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t][^\n]*\n)+([A-Za-z_][\w.]*)(?:: ([^\n]*))?")


# A frame of a Python traceback; the user's own frames are those outside these packages.
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_LIBRARY_PARTS = (f"{os.sep}pyspark{os.sep}", f"{os.sep}py4j{os.sep}", f"{os.sep}eventtime{os.sep}spark{os.sep}",
                  f"{os.sep}eventtime{os.sep}sinks{os.sep}", f"{os.sep}site-packages{os.sep}")


class QueryFailedError(RuntimeError):
    """A streaming query stopped on an error; ``error_class`` is Spark's, when it has one.
    ``trace_path`` names the file with the full Python and JVM trace, when one was written."""

    def __init__(self, message: str, error_class: Optional[str] = None, trace_path: Optional[str] = None) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.trace_path = trace_path


def failure_origin(text: str) -> Optional[str]:
    """``file:line in function`` of the innermost frame of the job's own code in a failure's
    Python traceback (not PySpark's, py4j's or eventtime's), else ``None``.

    >>> failure_origin('File "/x/site-packages/pyspark/sql/utils.py", line 163, in call\\n'
    ...                'File "/jobs/orders.py", line 8, in panes')
    '/jobs/orders.py:8 in panes'
    """
    frames = [m for m in _FRAME.finditer(text) if not any(part in m.group(1) for part in _LIBRARY_PARTS)]
    return f"{frames[-1].group(1)}:{frames[-1].group(2)} in {frames[-1].group(3)}" if frames else None


def write_failure_trace(text: str, directory: str, run_id: str) -> Optional[str]:
    """Write a failed query's full text (Python traceback and JVM stack) to
    ``<directory>/eventtime-failure-<run id>.txt``; its path, or ``None`` when it cannot be written."""
    path = os.path.join(directory, f"eventtime-failure-{run_id}.txt")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        return None
    return path


def short_failure(error: BaseException | str, trace_path: Optional[str] = None, pipeline: str = "") -> QueryFailedError:
    """A failure in three lines: the cause (:func:`describe_failure`), where in the job's own
    code it was raised, and the file with the full trace."""
    text = str(error)
    described = describe_failure(text)
    lines = [f"pipeline {pipeline} stopped: {described}" if pipeline else str(described)]
    origin = failure_origin(text)
    if origin:
        lines.append(f"  raised at {origin}")
    lines.append(f"  full trace: {trace_path}" if trace_path else "  full trace: query.exception()")
    return QueryFailedError("\n".join(lines), described.error_class, trace_path)


def trace_text(exc: BaseException) -> str:
    """PySpark's exception with its JVM stack, whatever ``spark.sql.pyspark.jvmStacktrace.enabled`` says."""
    desc, stack = getattr(exc, "_desc", None), getattr(exc, "_stackTrace", None)
    return f"{desc}\n\nJVM stacktrace:\n{stack}" if desc is not None and stack else str(exc)


def describe_failure(error: BaseException | str) -> QueryFailedError:
    """The innermost Spark error class of ``error`` with its message and root cause, in one line.

    >>> describe_failure("[FOREACH_BATCH_USER_FUNCTION_ERROR] x\\n... [CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] "
    ...                  "An error occurred during loading state.\\nCaused by: java.io.EOFException: eof").error_class
    'CANNOT_LOAD_STATE_STORE.UNCATEGORIZED'
    """
    text = str(error)
    found = [(m.group(1), m.group(2).strip()) for m in _CLASS.finditer(text) if m.group(1) not in _WRAPPERS]
    causes = _CAUSE.findall(text)
    root = causes[-1].strip() if causes else None
    if found:
        error_class, message = found[-1]
        summary = f"[{error_class}] {message}"
    else:
        error_class = None
        python = [(n, m) for n, m in _TRACEBACK_END.findall(text) if not n.startswith(_JVM_PREFIXES)]
        python = python or [(n, m) for n, m in _PYTHON.findall(text) if not n.startswith(_JVM_PREFIXES)]
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        if python:
            name, message = python[-1]
            summary, root = f"{name.rsplit('.', 1)[-1]}: {message.strip()}", None
            error_class = name.rsplit(".", 1)[-1]
        else:
            summary = lines[-1] if lines else type(error).__name__
    if root and root not in summary:
        summary += f" (caused by {root[:300]})"
    return QueryFailedError(summary, error_class)
