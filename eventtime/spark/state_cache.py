"""RocksDB's block cache sized to the operator's state (docs/limitations.md, "State size").

Spark's RocksDB state store gives each state store instance a block cache of
``spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB`` (8 MB by default). Once a store's
files outgrow it, reads miss the cache and every batch slows down as the state grows. After
each batch the router reads the state's file size from the query's progress
(``rocksdbSstFileSize`` over ``numStateStoreInstances``). When a store's files pass its cache,
it says so once, with the size to set, and records that size beside a local checkpoint: the
next start of the query sizes the cache itself, unless the session sets it.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Optional

__all__ = ["CACHE_CONF", "StateCache", "cache_mb_for"]

CACHE_CONF = "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB"
SPARK_DEFAULT_MB = 8
MAX_MB = 1024
CACHE_FILE = "eventtime-state-cache.json"  # beside the checkpoint's other eventtime files

log = logging.getLogger("eventtime.spark")


def cache_mb_for(store_bytes: float) -> int:
    """The block cache for a state store of ``store_bytes`` of files: the power of two MB at or
    above 1.25 times them, at least Spark's default 8 MB and at most 1 GB.

    >>> cache_mb_for(0), cache_mb_for(7 * 2**20), cache_mb_for(36 * 2**20), cache_mb_for(10 * 2**40)
    (8, 16, 64, 1024)
    """
    need, mb = store_bytes * 1.25 / 2**20, SPARK_DEFAULT_MB
    while mb < need and mb < MAX_MB:
        mb *= 2
    return mb


def _recorded(checkpoint: str) -> Optional[int]:
    try:
        with open(os.path.join(checkpoint, CACHE_FILE), encoding="utf-8") as handle:
            value = json.load(handle).get("block_cache_mb")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class StateCache:
    """One query's block cache: sized at start from what an earlier run recorded (when the
    session does not set it), then watched batch by batch (:meth:`observe`)."""

    def __init__(self, spark: Any, checkpoint: Optional[str], say: Callable[[str], None]) -> None:
        self.checkpoint, self.say, self.warned = checkpoint, say, False
        self.session_sets = spark.conf.get(CACHE_CONF, None) is not None
        self.recorded = recorded = _recorded(checkpoint) if checkpoint else None
        if recorded is not None and not self.session_sets:
            spark.conf.set(CACHE_CONF, str(recorded))
            say(f"eventtime: RocksDB block cache {recorded} MB per state store, sized by eventtime to the state's "
                f"files when this query last ran ({CACHE_CONF})")
        self.cache_mb = int(spark.conf.get(CACHE_CONF, None) or SPARK_DEFAULT_MB)

    def observe_query(self, query: Any) -> Optional[int]:
        """:meth:`observe` the query's last progress, read field by field (a third of the time of
        ``lastProgress``'s whole JSON, which each micro-batch would pay)."""
        progress = query._jsq.lastProgress()
        if progress is None:
            return None
        return self.observe({"stateOperators": [
            {"numStateStoreInstances": op.numStateStoreInstances(),
             "customMetrics": {"rocksdbSstFileSize": op.customMetrics().get("rocksdbSstFileSize")}}
            for op in progress.stateOperators()]})

    def observe(self, progress: Optional[dict]) -> Optional[int]:
        """Check one batch's progress; returns the cache size to use when the state outgrew the cache."""
        for op in (progress or {}).get("stateOperators") or ():
            files = (op.get("customMetrics") or {}).get("rocksdbSstFileSize")
            stores = op.get("numStateStoreInstances") or op.get("numShufflePartitions")
            if not files or not stores or files / stores <= self.cache_mb * 2**20:
                continue
            want = cache_mb_for(files / stores)
            if self.checkpoint and want > (self.recorded or 0):  # the file is read once, at start
                self.recorded = want
                tmp = os.path.join(self.checkpoint, CACHE_FILE + ".tmp")
                with open(tmp, "w", encoding="utf-8") as handle:
                    json.dump({"block_cache_mb": want, "store_file_bytes": int(files / stores)}, handle)
                os.replace(tmp, os.path.join(self.checkpoint, CACHE_FILE))
            if not self.warned:
                self.warned = True
                then = "set it" if self.session_sets or not self.checkpoint else \
                    "eventtime sets it when this query starts again; set it yourself to have it now"
                line = (f"eventtime: the state's files are {files / stores / 2**20:.0f} MB per state store, more than "
                        f"RocksDB's block cache of {self.cache_mb} MB: reads miss the cache and batches slow down "
                        f"as the state grows. Use {CACHE_CONF}={want} ({then})")
                log.warning(line)
                self.say(line)
            return want
        return None
