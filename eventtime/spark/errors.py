"""The Spark face of a failed streaming query: the query ``route`` returns raises it in three
lines, Spark's own console report of it is turned off, and a listener tells the alerter
(the text itself: :mod:`eventtime.ops.failures`)."""

from __future__ import annotations

import atexit
import logging
import tempfile
from typing import Any, Callable, Optional

from ..ops.failures import QueryFailedError, describe_failure, short_failure, trace_text, write_failure_trace
from .sink_checks import accepts_keyword

__all__ = ["QueryFailedError", "describe_failure", "RunningQuery", "FailureWatch"]

log = logging.getLogger("eventtime.spark")

try:
    from pyspark.sql.streaming import StreamingQuery as _StreamingQuery
except ImportError:  # pragma: no cover - the Spark engine needs pyspark
    _StreamingQuery = object  # type: ignore[assignment,misc]


class RunningQuery(_StreamingQuery):  # type: ignore[misc,valid-type]
    """What ``route(...).start()`` returns: PySpark's ``StreamingQuery`` whose
    ``awaitTermination`` and ``processAllAvailable`` raise a :class:`QueryFailedError` of three
    lines (cause, where in the job's code, the file with the full Python and JVM trace)
    instead of PySpark's exception with the whole JVM stack in its message.
    ``query.exception()`` still gives PySpark's exception.

    >>> query = route(out, panes=sink).start("/chk/orders")  # doctest: +SKIP
    >>> query.awaitTermination()  # doctest: +SKIP
    QueryFailedError: pipeline orders stopped: RuntimeError: disk full
      raised at /jobs/orders.py:8 in panes
      full trace: /chk/orders/eventtime-failure-<run id>.txt
    """

    def __init__(self, query: Any, pipeline: str, trace_dir: Optional[str], settle: Any = None) -> None:
        super().__init__(query._jsq)
        self._pipeline = pipeline
        self._trace_dir = trace_dir
        self._settle = settle

    def _shorten(self, exc: BaseException) -> QueryFailedError:
        if self._settle is not None:
            self._settle()
        text = trace_text(exc)
        path = write_failure_trace(text, self._trace_dir or tempfile.gettempdir(), str(self.runId))
        return short_failure(text, path, self._pipeline)

    def awaitTermination(self, timeout: Optional[int] = None) -> Optional[bool]:
        from pyspark.errors import StreamingQueryException

        try:
            return super().awaitTermination(timeout)
        except StreamingQueryException as exc:
            raise self._shorten(exc) from None

    def processAllAvailable(self) -> None:
        from pyspark.errors import StreamingQueryException

        try:
            return super().processAllAvailable()
        except StreamingQueryException as exc:
            raise self._shorten(exc) from None


# Spark logs a failed query's whole JVM stack to the console at ERROR from here; route reports it.
_SPARK_FAILURE_LOGGERS = ("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                          "org.apache.spark.sql.execution.streaming.MicroBatchExecution")


def quiet_spark_failure_log(spark: Any) -> None:
    """Turn off Spark's console report of a failed query (a 60-line JVM stack): the
    :class:`RunningQuery` raises it in three lines, with the full trace in a file."""
    try:
        jvm = spark._jvm
        level = jvm.org.apache.logging.log4j.Level.FATAL
        for name in _SPARK_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # noqa: BLE001 - another logging backend: Spark's report stays
        log.debug("eventtime: could not lower Spark's query-failure console log", exc_info=True)


class FailureWatch:
    """Sends ``pipeline_failed`` to the alerter (``on_failure``, fingerprinted by the innermost
    error class) once when the query stops on an error: a listener on the session, removed
    once the query has ended, with the events already posted delivered first (an event that
    reaches the listener while the interpreter exits fails in the JVM with a 60-line Py4J
    stack), and at interpreter exit at the latest."""

    def __init__(self, alerter: Any, query_id: Callable[[], str]) -> None:
        import threading

        self.alerter = alerter
        self._query_id = query_id
        self.failure: Optional[QueryFailedError] = None  # the error the query stopped on, once reported
        self.failure_text: Optional[str] = None  # the query's own error text (with the JVM stack)
        self.reported = threading.Event()
        self._listener = None
        self._spark = None
        self._bounded = False

    def start(self, spark: Any, checkpoint: str, bounded: bool) -> None:
        """Before a query of the route starts: a bounded run (end of input) keeps the listener
        for its second query."""
        quiet_spark_failure_log(spark)
        self._bounded = bounded
        self.failure = self.failure_text = None
        self.reported.clear()
        if self.alerter is None or not callable(getattr(self.alerter, "on_failure", None)) or self._listener is not None:
            return
        from pyspark.sql.streaming import StreamingQueryListener

        watch = self
        report = {"checkpoint": checkpoint}
        pass_run_id = accepts_keyword(self.alerter.on_failure, "run_id")

        class _FailureListener(StreamingQueryListener):
            def onQueryStarted(self, event) -> None:
                pass

            def onQueryProgress(self, event) -> None:
                pass

            def onQueryIdle(self, event) -> None:
                pass

            def onQueryTerminated(self, event) -> None:
                ours = watch._query_id()
                if not ours or str(event.id) != str(ours):
                    return
                if event.exception:
                    watch.failure_text = event.exception
                    watch.failure = describe_failure(event.exception)
                    try:
                        run = {"run_id": str(event.runId)} if pass_run_id else {}
                        watch.alerter.on_failure(watch.failure, **report, **run)
                    finally:
                        watch.reported.set()
                if event.exception or not watch._bounded:
                    watch.stop(from_listener=True)

        self._spark = spark
        self._listener = _FailureListener()
        spark.streams.addListener(self._listener)
        atexit.register(self.stop)

    def settle(self) -> None:
        """The query failed and the job is told: let the alerter's report finish, then remove the
        listener before the job (and its interpreter) goes on or exits."""
        if self._listener is not None:
            self.reported.wait(30.0)
            self.stop()

    def stop(self, from_listener: bool = False) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        spark = self._spark
        if from_listener:  # not from inside the listener bus' own callback
            import threading

            threading.Thread(target=spark.streams.removeListener, args=(listener,), daemon=True).start()
            return
        try:  # deliver the events already posted (e.g. the last batch's progress) first
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
        except Exception:  # noqa: BLE001 - a stopped context or a timeout: remove it anyway
            pass
        try:
            spark.streams.removeListener(listener)
        except Exception:  # noqa: BLE001 - the session is already stopped
            pass
