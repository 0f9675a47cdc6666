"""The delta-spark write path: used when the session has Delta configured
(``spark.sql.extensions`` with ``DeltaSparkSessionExtension`` and the delta-spark jars, e.g.
``eventtime.local_session(delta=True)``); delta-rs otherwise."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, Mapping, Sequence

import pyarrow as pa

log = logging.getLogger("eventtime.sinks.delta_write")

__all__ = ["spark_has_delta", "write_via_spark", "append_via_spark", "active_session"]

# ---------------------------------------------------------------------------
# Spark / delta-spark


def active_session() -> Any:
    """The driver's Spark session when one is running in this process, else ``None``.

    Never starts a session (and does not import pyspark when nothing imported it yet).

    >>> active_session() is None or hasattr(active_session(), "sparkContext")
    True
    """
    if "pyspark" not in sys.modules:
        return None
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        if SparkContext._active_spark_context is None:
            return None
        return SparkSession.getActiveSession() or SparkSession._instantiatedSession
    except Exception:  # noqa: BLE001 - Spark Connect or a stopped context: no session to use
        return None


def spark_has_delta(spark: Any) -> bool:
    """Whether a Spark session has Delta Lake (delta-spark) available.

    True when ``spark.sql.extensions`` names the Delta extension and the class
    ``io.delta.tables.DeltaTable`` can be loaded by the JVM.

    >>> spark_has_delta(None)
    False
    """
    if spark is None:
        return False
    try:
        ext = spark.conf.get("spark.sql.extensions", "") or ""
    except Exception:  # noqa: BLE001 - a conf read must never break detection
        ext = ""
    if "DeltaSparkSessionExtension" not in ext:
        return False
    try:
        jvm = spark._jvm  # not available on Spark Connect
        jvm.java.lang.Class.forName(
            "io.delta.tables.DeltaTable", True, jvm.Thread.currentThread().getContextClassLoader()
        )
        return True
    except Exception:  # noqa: BLE001
        return False


def write_via_spark(
    spark: Any,
    data: Any,
    path: str,
    app_id: str,
    version: int,
    partition_by: Sequence[str] | None = None,
    user_metadata: Mapping[str, Any] | None = None,
) -> None:
    """Append ``data`` (a ``pyarrow.Table`` or Spark DataFrame) to a Delta table through
    Spark's ``delta`` format, idempotently: delta-spark skips the write when the table
    already has a transaction ``txnAppId`` with ``txnVersion >= version`` (checked in the
    commit itself, so two writers of the same batch commit it once). New columns merge into
    the table's schema (``mergeSchema``); ``user_metadata`` goes into the commit's
    ``userMetadata`` as JSON.

    Requires delta-spark on the session's classpath (see :func:`spark_has_delta`).

    Example (needs delta-spark):
        ``write_via_spark(spark, table, "/data/late", "eventtime/late/p/q1", 7, ["detected_date"])``
    """
    if not spark_has_delta(spark):
        raise RuntimeError(
            "write_via_spark needs a Spark session with Delta Lake configured "
            "(delta-spark jars on the classpath and spark.sql.extensions="
            "io.delta.sql.DeltaSparkSessionExtension), e.g. eventtime.local_session(delta=True)"
        )
    df = spark.createDataFrame(data) if isinstance(data, pa.Table) else data
    writer = (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", str(int(version)))
        .option("mergeSchema", "true")
    )
    if user_metadata:
        writer = writer.option("userMetadata", json.dumps(dict(user_metadata), sort_keys=True))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(path)


def append_via_spark(sink: Any, data: Any, rows: int, batch_id: int, query_id: str, app_id: str,
                     partition_by: Sequence[str] | None, attempts: int) -> Any:
    """One attempt of a :class:`~eventtime.sinks.DeltaSink` to append ``data`` (a
    ``pyarrow.Table`` or a DataFrame of ``rows`` rows) through Spark's Delta writer; its
    ``WriteResult``. delta-spark refuses a ``txnVersion`` the table already has for
    ``txnAppId`` in the commit itself; the delta-rs read of the table's log before it only
    tells the skip apart (and is left out when delta-rs cannot read the table)."""
    from .exactly_once import WriteResult

    try:
        dt = sink._table()
    except Exception as exc:  # noqa: BLE001 - a table delta-rs cannot open: Spark still skips
        log.debug("eventtime: delta-rs cannot read %s (%s); relying on delta-spark's txn check", sink.path, exc)
        dt = None
    else:
        skipped = sink._committed(dt, app_id, batch_id, query_id, attempts)
        if skipped is not None:
            return skipped
    before = None if dt is None else dt.version()
    write_via_spark(sink.spark, data, sink.path, app_id, batch_id, partition_by,
                    user_metadata=sink._commit_metadata(query_id, batch_id))
    try:
        dt = sink._table()
    except Exception:  # noqa: BLE001
        return WriteResult(True, rows, attempts)
    version = None if dt is None else dt.version()
    if dt is not None and before is not None and version == before:  # delta-spark skipped it (a race)
        return WriteResult(False, 0, attempts, skipped="already_committed", version=version)
    return WriteResult(True, rows, attempts, version=version)
