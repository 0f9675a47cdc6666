"""RocksDB's block cache against the state (eventtime/spark/state_cache.py): a query whose state
store files outgrow the cache says so once, with the size to set, and records it beside the
checkpoint; the next start of the query sizes the cache itself unless the session sets it."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eventtime
from eventtime.spark.state_cache import CACHE_CONF, CACHE_FILE, StateCache

pytestmark = [pytest.mark.spark, pytest.mark.slow]
DAY0_MS = 1_714_521_600_000


def _write(src: str, name: str, keys: range) -> None:
    pq.write_table(pa.table({"user_id": [f"u{i:06d}" for i in keys], "ts": [DAY0_MS + i for i in keys]}),
                   os.path.join(src, name))


def _run(spark, src: str, checkpoint: str, said: list) -> None:
    events = spark.readStream.schema("user_id string, ts bigint").option("maxFilesPerTrigger", 1).parquet(src).transform(
        eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01", max_future="3650 days"))
    out = events.transform(eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 day"),
                                                      allowed_lateness="1 day"))
    eventtime.route(out, panes=lambda t, b, q: None, progress=said.append).start(
        checkpoint=checkpoint, trigger={"availableNow": True}).awaitTermination()


def test_state_that_outgrows_the_cache_is_said_once_recorded_and_sized_at_the_next_start(spark, tmp_path):
    src, checkpoint = str(tmp_path / "src"), str(tmp_path / "checkpoint")
    os.makedirs(src)
    _write(src, "a.parquet", range(0, 250_000))  # about 4 MB of state files in two stores
    _write(src, "b.parquet", range(250_000, 260_000))
    said: list = []
    spark.conf.set(CACHE_CONF, "1")  # a session that sets a 1 MB cache: smaller than a store's files
    # two state stores (an in-process demo run earlier in this worker may have left it at 4)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        _run(spark, src, checkpoint, said)
        warnings = [line for line in said if "more than RocksDB's block cache of 1 MB" in line]
        assert len(warnings) == 1, said  # once, although every later batch is over it too
        assert f"Use {CACHE_CONF}=8 (set it)" in warnings[0]
        with open(os.path.join(checkpoint, CACHE_FILE), encoding="utf-8") as handle:
            recorded = json.load(handle)
        assert recorded["block_cache_mb"] == 8 and recorded["store_file_bytes"] > 2**20

        spark.conf.unset(CACHE_CONF)  # the session leaves it to eventtime: the next start sizes it
        _write(src, "c.parquet", range(260_000, 260_010))
        again: list = []
        _run(spark, src, checkpoint, again)
        assert spark.conf.get(CACHE_CONF) == "8"
        assert any(line.startswith("eventtime: RocksDB block cache 8 MB per state store, sized by eventtime")
                   for line in again), again
        assert not any("more than RocksDB's block cache" in line for line in again)  # 8 MB holds it
    finally:
        spark.conf.unset(CACHE_CONF)
        spark.conf.set("spark.sql.shuffle.partitions", partitions)


def test_a_session_that_sets_the_cache_keeps_its_setting(spark, tmp_path):
    with open(tmp_path / CACHE_FILE, "w", encoding="utf-8") as handle:
        json.dump({"block_cache_mb": 64}, handle)
    said: list = []
    spark.conf.set(CACHE_CONF, "32")
    try:
        cache = StateCache(spark, str(tmp_path), said.append)
        assert (spark.conf.get(CACHE_CONF), cache.cache_mb, said) == ("32", 32, [])
        progress = {"stateOperators": [{"numStateStoreInstances": 4, "customMetrics": {"rocksdbSstFileSize": 4 * 40 * 2**20}}]}
        assert cache.observe(progress) == 64 and cache.observe(progress) == 64 and len(said) == 1
        assert said[0].endswith(f"Use {CACHE_CONF}=64 (set it)")
        assert cache.observe({"stateOperators": [{"numStateStoreInstances": 4, "customMetrics": {
            "rocksdbSstFileSize": 4 * 20 * 2**20}}]}) is None  # 20 MB a store fit in 32
    finally:
        spark.conf.unset(CACHE_CONF)
