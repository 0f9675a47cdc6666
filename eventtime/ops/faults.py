"""Crash injection for the reliability tests (never active unless ``EVENTTIME_FAULT`` is set).

``EVENTTIME_FAULT="kill:<point>:<batch_id>"`` makes the process SIGKILL itself (and its
process group, the Spark JVM included, when it leads one) the first time it reaches
``<point>`` for micro-batch ``<batch_id>``. The points, in the order one batch meets them
(docs/reliability.md):

* ``before_write``: the operator ran, no sink has written the batch;
* ``between_writes``: the results table has the batch, the late-data table has not;
* ``after_write``: both Delta commits are done, Spark has not committed the batch;
* ``after_commit``: Spark committed the batch (checked when the next batch starts);
* ``after_db_commit``: a :class:`eventtime.sinks.BatchSink` (e.g. PostgreSQL) committed the
  batch's transaction, Spark has not committed the batch.

``eventtime late reconcile`` meets two, with its run's number as the batch id:
``before_reconcile_commit`` (planned, nothing written) and ``after_reconcile_commit``.
"""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["FAULT_ENV", "POINTS", "fault_point"]

FAULT_ENV = "EVENTTIME_FAULT"
POINTS = ("before_write", "between_writes", "after_write", "after_commit", "after_db_commit", "before_reconcile_commit",
          "after_reconcile_commit")
log = logging.getLogger("eventtime.faults")  # the name it had before the package had folders


def _parse(spec: str) -> tuple[str, int]:
    action, point, batch = spec.split(":")
    if action != "kill" or point not in POINTS:
        raise ValueError(f"{FAULT_ENV} must be 'kill:<point>:<batch_id>' with point in {POINTS}, got {spec!r}")
    return point, int(batch)


def fault_point(point: str, batch_id: int) -> None:
    """Kill this process here if ``EVENTTIME_FAULT`` asks for ``point`` at ``batch_id``."""
    spec = os.environ.get(FAULT_ENV)
    if not spec or _parse(spec) != (point, batch_id):
        return
    log.warning("eventtime: %s=%s: killing the process at %s of batch %s", FAULT_ENV, spec, point, batch_id)
    for handler in logging.getLogger().handlers:
        handler.flush()
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
