"""A local SparkSession configured for the eventtime engine (its jar on ``spark.jars``).

Local sessions are quiet: Spark logs errors only (a shipped ``log4j2.properties``). What is
left, and cannot be silenced from Python:

* ``WARNING: Using incubator modules: jdk.incubator.vector`` -- printed by the JVM itself
  for a module Spark's launcher always adds (``JavaModuleOptions``);
* errors: a query that stops on an error is logged by Spark (``ERROR MicroBatchExecution``,
  with its stack trace), on purpose.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

__all__ = ["local_session", "ROCKSDB_PROVIDER", "ENGINE_CONF"]

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# What the engine needs from any session (local or cluster):
# * transformWithState only runs on the RocksDB state store provider;
# * the stream's watermark must advance on no-data batches (the default) for ON_TIME panes
#   to come right after the batch that made them due.
ENGINE_CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
}

# Hadoop's FileContext for file: paths in local mode: the engine jar's, which does not start a
# process per checkpoint file (Hadoop's runs readlink and chmod without its native library).
LOCAL_FILE_CONTEXT_KEY = "fs.AbstractFileSystem.file.impl"
LOCAL_FILE_CONTEXT = "eventtime.jvm.spark.LocalFiles$ContextFs"


def local_session(
    master: str = "local[2]",
    app_name: str = "eventtime",
    shuffle_partitions: int = 4,
    extra_conf: Optional[dict] = None,
    kafka: bool = False,
    delta: bool = False,
    extra_jars: Sequence[str] = (),
):
    """Build (or get) a SparkSession for eventtime.

    ``kafka=True`` puts Spark's Kafka source (``spark-sql-kafka-0-10``) on the class path and
    ``delta=True`` Delta Lake (``delta-spark``, with its SQL extension and catalog, so the
    Delta sinks write through Spark); both are the jars ``make install`` resolved from Maven
    Central for the installed pyspark (:mod:`eventtime.spark.connectors`). A connector that is
    missing, or not served for this Spark version, is refused before the session starts, with
    what to install. A ``spark://`` master that accepts no connection is refused before the
    session starts (:class:`eventtime.spark.cluster.MasterUnreachableError`, naming the URL).
    ``extra_jars``: more jars on the same class path (your own UDFs' or data sources').

    Sets the RocksDB state store provider (required by ``transformWithState``), a small
    number of shuffle partitions, the UTC session time zone, and ``PYSPARK_PYTHON`` to the
    running interpreter (the Python workers must import ``eventtime`` and ``pandas``). With a
    ``local`` master, checkpoints are written through the engine jar's Hadoop ``FileContext``
    for ``file:`` paths, which does not start a ``readlink`` / ``chmod`` process per file.

    >>> spark = local_session()  # doctest: +SKIP
    """
    from pyspark.sql import SparkSession

    from .cluster import check_master

    # a spark:// master that does not answer: refused now, naming it, not after Spark's
    # minute of registration retries
    check_master(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Bind to loopback unless told otherwise: local mode needs no other interface, and a
    # host name that does not resolve otherwise costs a warning and a slow lookup.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.api.mode", "classic")  # the engine needs py4j (SPARK_CONNECT_MODE would give Connect)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.numRecentProgressUpdates", "200")
        # errors only from Spark's loggers (the JVM is started with it, so from the first line);
        # spark.sparkContext.setLogLevel("INFO") still works for debugging
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
    )
    for key, value in ENGINE_CONF.items():
        builder = builder.config(key, value)
    from .engine import check_engine_version, engine_jar

    jar = engine_jar()
    jars = [jar]
    if kafka or delta:
        import pyspark

        from .connectors import require_connector_jars

        for name, wanted in (("kafka", kafka), ("delta", delta)):
            if wanted:
                jars += require_connector_jars(name, pyspark.__version__)
    if delta:
        builder = (
            builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        )
        if master.startswith("local"):
            # Delta's defaults (50 snapshot partitions, 10 000-way file listing) made a commit
            # take ~4 s instead of 0.7 s and VACUUM 66 s instead of 9 s on 2 cores
            builder = (
                builder.config("spark.databricks.delta.snapshotPartitions", str(shuffle_partitions))
                .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", str(shuffle_partitions))
            )
    builder = builder.config("spark.jars", ",".join([*jars, *extra_jars]))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    check_engine_version(spark, jar)
    spark.sparkContext.setLogLevel("ERROR")
    if spark.sparkContext.master.startswith("local") and not spark.sparkContext.master.startswith("local-cluster"):
        # checkpoint files without a readlink / chmod process per call (eventtime.jvm.spark.LocalFiles)
        spark.sparkContext._jsc.hadoopConfiguration().set(LOCAL_FILE_CONTEXT_KEY, LOCAL_FILE_CONTEXT)
    return spark
