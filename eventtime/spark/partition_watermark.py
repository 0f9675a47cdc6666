"""The driver's side of per-partition watermarks (``window_aggregate(watermark="per_partition")``).

Spark keeps one global watermark. In per-partition mode the driver computes W itself with the
core's rules (:class:`eventtime.core.watermark.PartitionClocks`), once per micro-batch:

1. before batch ``N`` runs, W is read from the state the driver saved after batch ``N - 1``
   and published to the batch's tasks (the local property the map side and the operator read);
2. after it, each partition's largest valid event time comes from the batch's statistics
   rows, the batch's processing time from the checkpoint's offset log (so a re-run batch
   computes the same W), and the new state is saved as ``<checkpoint>/eventtime-watermarks/N``
   before Spark commits the batch;
3. when W moved, a tick is raised on the query's tick stream: the next batch then wakes every
   bucket of the operator (which has no timers in this mode) to fire and purge by the new W.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

from ..core.watermark import PER_PARTITION, PartitionClocks, WatermarkPolicy, WatermarkStep
from .checkpoint_files import batch_offsets
from .control import read_signal, write_signal

__all__ = ["PartitionWatermarkDriver"]

STATE_DIR = "eventtime-watermarks"
_KEEP = 100  # batches of state kept (Spark keeps 100 batches of its own logs by default)


class PartitionWatermarkDriver:
    """Computes, publishes and saves the per-partition watermark of one streaming query."""

    def __init__(self, policy: WatermarkPolicy, max_out_of_orderness_ms: int, checkpoint_dir: str,
                 tick_signal: Optional[str]) -> None:
        self.policy = policy
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        self.checkpoint_dir = checkpoint_dir
        self.dir = os.path.join(checkpoint_dir, STATE_DIR)
        self.tick_signal = tick_signal
        #: Replay only: the processing time of the batches run next (else the offset log's).
        self.processing_time_ms: Optional[int] = None
        self.watermark_ms: Optional[int] = None
        self.last_step: Optional[WatermarkStep] = None
        self._clocks: Optional[PartitionClocks] = None
        # The tick stream's offset is the count of raises. A restarted driver has a new, empty
        # signal file, and the source never goes behind its checkpointed offset: the count is
        # kept beside the checkpoint (written before the signal, so it is never behind it) and
        # the signal file starts from it.
        self._ticks = self._read_ticks()
        if tick_signal and self._ticks > read_signal(tick_signal):
            write_signal(tick_signal, self._ticks)

    def _read_ticks(self) -> int:
        try:
            with open(os.path.join(self.dir, "ticks"), encoding="utf-8") as handle:
                return int(handle.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _tick(self) -> None:
        self._ticks += 1
        os.makedirs(self.dir, exist_ok=True)
        write_signal(os.path.join(self.dir, "ticks"), self._ticks)
        write_signal(self.tick_signal, self._ticks)

    def _path(self, batch_id: int) -> str:
        return os.path.join(self.dir, str(batch_id))

    def before_batch(self, batch_id: int) -> Optional[int]:
        """Load the state saved after the latest earlier batch; return this batch's W."""
        earlier = [int(n) for n in os.listdir(self.dir) if n.isdigit() and int(n) < batch_id] if os.path.isdir(self.dir) else []
        if not earlier:
            if batch_id > 0 and os.path.isdir(os.path.join(self.checkpoint_dir, "commits")) and any(
                    n.isdigit() for n in os.listdir(os.path.join(self.checkpoint_dir, "commits"))):
                raise RuntimeError(
                    f"eventtime: per-partition watermark state is missing from {self.dir} for batch {batch_id} "
                    "(the checkpoint was written without it, or the folder was deleted); restore it, or start the "
                    "query on a new checkpoint"
                )
            self._clocks = PartitionClocks(self.policy, self.max_out_of_orderness_ms)
            self.watermark_ms = None
            return None
        with open(self._path(max(earlier)), encoding="utf-8") as handle:
            data = json.load(handle)
        self._clocks = PartitionClocks.from_json(self.policy, self.max_out_of_orderness_ms, data)
        self.watermark_ms = data.get("watermark_ms")
        return self.watermark_ms

    def running_max_ms(self) -> Optional[int]:
        """The largest valid event time of every partition so far (before this batch)."""
        return max(self._clocks.max_ms.values()) if self._clocks is not None and self._clocks.max_ms else None

    def batch_time_ms(self, batch_id: int) -> int:
        """The batch's processing time: Spark's, from the offset log (the same when re-run)."""
        if self.processing_time_ms is not None:
            return self.processing_time_ms
        return int(batch_offsets(self.checkpoint_dir, batch_id)["batchTimestampMs"])

    def after_batch(self, batch_id: int, batch_max_ms: Mapping[Any, Optional[int]]) -> WatermarkStep:
        """Apply the batch (each partition's largest valid event time), save, tick if W moved."""
        before = self.watermark_ms
        step = self._clocks.advance(before, batch_max_ms, self.batch_time_ms(batch_id))
        os.makedirs(self.dir, exist_ok=True)
        tmp = self._path(batch_id) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"watermark_ms": step.watermark_ms, **self._clocks.to_json()}, handle)
        os.replace(tmp, self._path(batch_id))
        for name in os.listdir(self.dir):
            if name.isdigit() and int(name) <= batch_id - _KEEP:
                os.remove(os.path.join(self.dir, name))
        self.watermark_ms, self.last_step = step.watermark_ms, step
        if step.watermark_ms is not None and (before is None or step.watermark_ms > before) and self.tick_signal:
            self._tick()
        return step

    def apply(self, batch_id: int, stats_rows: Any, stats: Any) -> Any:
        """The batch's partitions' largest valid event times (its statistics rows) into W:
        ``stats`` (a ``BatchStats``) with the new W and the partitions' idleness."""
        import dataclasses

        maxima: dict = {}
        for p, t in zip(stats_rows.column("partition").to_pylist(), stats_rows.column("stat_max_event_time").to_pylist()):
            maxima[p] = t if maxima.get(p) is None else (maxima[p] if t is None else max(maxima[p], t))
        step = self.after_batch(batch_id, maxima)
        return dataclasses.replace(
            stats, watermark_ms=step.watermark_ms, idle_partitions=tuple(sorted(map(str, self._clocks.idle))),
            became_idle=tuple(map(str, step.became_idle)), became_active=tuple(map(str, step.became_active)),
            holdback_ms=step.holdback_ms, watermark_mode=PER_PARTITION)
