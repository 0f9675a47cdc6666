"""Short, actionable descriptions of failed streaming queries.

A query that fails inside ``foreachBatch`` reports a Python traceback around a Java stack
around the real cause; the Spark error class that says what happened (e.g.
``CANNOT_LOAD_STATE_STORE``) sits deep inside it.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["QueryFailedError", "describe_failure"]

# Error classes that only say "the failure happened in there", never what it was.
_WRAPPERS = {"FOREACH_BATCH_USER_FUNCTION_ERROR", "STREAM_FAILED"}
_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\] ([^\n]*)")
_CAUSE = re.compile(r"Caused by: ([\w.$]+(?:Exception|Error)[^\n]*)")
# A Python exception raised in foreachBatch ends its traceback with "module.Class: message".
_PYTHON = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.M)
_JVM_PREFIXES = ("py4j.", "java.", "javax.", "org.", "scala.", "com.")
# The exception line that ends a Python traceback, whatever the class is called.
_TRACEBACK_END = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t][^\n]*\n)+([A-Za-z_][\w.]*)(?:: ([^\n]*))?")


class QueryFailedError(RuntimeError):
    """A streaming query stopped on an error; ``error_class`` is Spark's, when it has one."""

    def __init__(self, message: str, error_class: Optional[str] = None) -> None:
        super().__init__(message)
        self.error_class = error_class


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
