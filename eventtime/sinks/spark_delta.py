"""The delta-spark write path: used when the session already has Delta configured
(``spark.sql.extensions`` with ``DeltaSparkSessionExtension``); delta-rs otherwise."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

__all__ = ["spark_has_delta", "write_via_spark"]

# ---------------------------------------------------------------------------
# Spark / delta-spark


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
    try:
        jvm = spark._jvm  # not available on Spark Connect
        jvm.java.lang.Class.forName(
            "io.delta.tables.DeltaTable", True, jvm.Thread.currentThread().getContextClassLoader()
        )
        has_class = True
    except Exception:  # noqa: BLE001
        has_class = False
    return has_class and "DeltaSparkSessionExtension" in ext


def write_via_spark(
    spark: Any,
    data: Any,
    path: str,
    app_id: str,
    version: int,
    partition_by: Sequence[str] | None = None,
) -> None:
    """Append ``data`` (a ``pyarrow.Table`` or Spark DataFrame) to a Delta table through
    Spark's ``delta`` format, idempotently: delta-spark skips the write when the table
    already has a transaction ``txnAppId`` with ``txnVersion >= version``.

    Requires delta-spark on the session's classpath (see :func:`spark_has_delta`).

    Example (needs delta-spark):
        ``write_via_spark(spark, table, "/data/late", "eventtime/late/p/q1", 7, ["detected_date"])``
    """
    if not spark_has_delta(spark):
        raise RuntimeError(
            "write_via_spark needs a Spark session with Delta Lake configured "
            "(delta-spark jars on the classpath and spark.sql.extensions="
            "io.delta.sql.DeltaSparkSessionExtension)"
        )
    df = spark.createDataFrame(data) if isinstance(data, pa.Table) else data
    writer = (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", str(int(version)))
        .option("mergeSchema", "true")
    )
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(path)
