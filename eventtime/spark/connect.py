"""Spark Connect: what of eventtime runs on a Spark Connect client, and a plain refusal of the rest.

eventtime's engine is a JVM operator (the engine jar, ``eventtime/spark/engine``) that the Python side
reaches through the session's py4j gateway (``spark._jvm``): ``window_aggregate`` plans the
operator with it, ``with_event_time`` on a stream adds the engine's end-of-input control
source and batch-time column with it, and ``route`` collects each batch with it. A Spark
Connect client (``SparkSession.builder.remote("sc://...")``, ``spark.api.mode=connect``,
``SPARK_REMOTE``) talks to its server over gRPC and has no py4j gateway, so none of that can
be reached from it, even when the Connect server has the engine jar on its class path.

Under Spark Connect, today:

* works: ``with_event_time`` on a static (batch) DataFrame -- plain Spark SQL expressions;
* refused, before any Spark work, with :class:`ClassicSessionRequiredError`:
  ``window_aggregate``, ``route`` / ``Router`` and ``with_event_time`` on a streaming DataFrame.

A Connect object is recognised by the module of its class (``pyspark.sql.connect.*``), so
nothing here imports ``pyspark.sql.connect`` (which needs grpcio) or pyspark at all.

>>> class DataFrame: pass
>>> DataFrame.__module__ = "pyspark.sql.connect.dataframe"
>>> is_connect(DataFrame()), is_connect(object())
(True, False)
"""

from __future__ import annotations

from typing import Any

from .engine import EngineUnavailableError

__all__ = ["ClassicSessionRequiredError", "is_connect", "require_classic", "CONNECT_PACKAGE"]

CONNECT_PACKAGE = "pyspark.sql.connect"


class ClassicSessionRequiredError(EngineUnavailableError):
    """The engine was asked for on a Spark Connect session: it needs a classic (py4j) session.

    An :class:`~eventtime.spark.engine.EngineUnavailableError` (a ``RuntimeError``): the engine
    cannot be reached from the session, as when its jar is missing; ``what`` names the
    eventtime function that refused."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` (a DataFrame, a SparkSession, a Column...) is Spark Connect's: one of its
    classes is defined in ``pyspark.sql.connect`` or below. Makes no call to Spark."""
    for cls in type(obj).__mro__:
        module = getattr(cls, "__module__", None) or ""
        if module == CONNECT_PACKAGE or module.startswith(CONNECT_PACKAGE + "."):
            return True
    return False


def _class_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def message(what: str, obj: Any) -> str:
    """The refusal's text: what was called, why it cannot run, what to do, what works."""
    return (
        f"{what} needs a classic (py4j) Spark session, but was given a Spark Connect {type(obj).__name__} "
        f"({_class_name(obj)}).\n"
        "  Why: the eventtime engine is a JVM operator (the engine jar) that eventtime reaches through the "
        "session's py4j gateway (spark._jvm); a Spark Connect client talks to its server over gRPC and has no "
        "py4j gateway, so the engine cannot be reached from it, even when the Connect server has the engine jar "
        "on its class path.\n"
        "  What to do: run this job on a classic session: spark-submit --jars <engine jar> job.py (without "
        "--remote; `python -m eventtime.spark.engine` prints the jar's path), or in Python "
        "SparkSession.builder.master(...).config('spark.api.mode', 'classic')"
        ".config('spark.jars', eventtime.engine_jar()).getOrCreate(), or eventtime.local_session(); "
        "not SparkSession.builder.remote(...), SPARK_REMOTE or spark.api.mode=connect.\n"
        "  Under Spark Connect today: with_event_time on a static (batch) DataFrame works; window_aggregate, "
        "route and with_event_time on a streaming DataFrame need a classic session "
        "(docs/deploy.md, \"Spark Connect\")."
    )


def require_classic(df_or_session: Any, what: str, streaming_only: bool = False) -> None:
    """Raise :class:`ClassicSessionRequiredError` when ``df_or_session`` is Spark Connect's.

    ``what`` names the eventtime function the user called (it heads the message).
    ``streaming_only``: refuse a Connect DataFrame only when it is streaming (asks the server
    ``isStreaming``, an analysis, not a job); a classic object costs nothing either way.

    >>> require_classic(object(), "window_aggregate")  # not Connect: nothing happens
    """
    if not is_connect(df_or_session):
        return
    if streaming_only and not getattr(df_or_session, "isStreaming", False):
        return
    raise ClassicSessionRequiredError(message(what, df_or_session), what)
