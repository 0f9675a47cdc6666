"""The operator's grouping keys spread its 32 hash buckets evenly over the shuffle partitions.

Spark sends each grouping key of ``transformWithState`` to a shuffle partition by its hash
partitioning (murmur3 of the key, modulo the partition count). With the buckets' own numbers
0..31 as keys, 20 of the 32 buckets went to one of 2 partitions (5 / 10 / 7 / 10 of 4), and the
task holding most of them set the operator stage's time. ``Layout.GROUP_IDS`` holds, per bucket,
an id that lands in partition ``bucket mod P``; this checks it with Spark's own partitioner.
"""

from __future__ import annotations

import collections

import pytest
from pyspark.sql import functions as F

from eventtime.spark.aggregate import ensure_engine
from eventtime.spark.plan import NUM_BUCKETS

pytestmark = pytest.mark.spark

PARTITION_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32)


@pytest.fixture(scope="module")
def group_ids(spark):
    ensure_engine(spark)
    ids = list(spark._jvm.eventtime.jvm.Engine.groupIds())
    assert len(ids) == 2 * NUM_BUCKETS
    return ids


def test_the_grouping_ids_are_distinct_non_negative_ints(group_ids):
    assert len(set(group_ids)) == len(group_ids)
    assert all(0 <= g < 2**31 for g in group_ids)


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_spark_sends_bucket_b_to_partition_b_mod_p(spark, group_ids, partitions):
    """Hash partitioning as the stateful operator's shuffle does it: ``repartition(P, key)``."""
    rows = [(slot, g) for slot, g in enumerate(group_ids)]
    df = spark.createDataFrame(rows, "slot int, et__gb int").repartition(partitions, "et__gb")
    placed = {r.slot: r.p for r in df.select("slot", F.spark_partition_id().alias("p")).collect()}
    assert placed == {slot: (slot % NUM_BUCKETS) % partitions for slot in range(2 * NUM_BUCKETS)}
    keyed = collections.Counter(placed[b] for b in range(NUM_BUCKETS))
    assert max(keyed.values()) - min(keyed.values()) <= 1
    assert len(keyed) == min(partitions, NUM_BUCKETS)


def test_the_buckets_numbers_themselves_would_not_spread(spark):
    """Why the ids exist: the ints 0..31 fall 12 / 20 over two partitions."""
    df = spark.range(NUM_BUCKETS).select(F.col("id").cast("int").alias("et__gb")).repartition(2, "et__gb")
    counts = collections.Counter(r.p for r in df.select(F.spark_partition_id().alias("p")).collect())
    assert sorted(counts.values()) == [12, 20]
