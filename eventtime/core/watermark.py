"""How the watermark moves: one global maximum, or one per source partition with idleness.

The rules are written in docs/semantics.md ("Per-partition watermarks"); this module is
their one statement in code, used by the reference model and by the Spark engine's driver
(eventtime/spark/router.py), which publishes the result to the JVM operator.

>>> policy = WatermarkPolicy("per_partition", idle_timeout_ms="1 minute")
>>> clocks = PartitionClocks(policy, max_out_of_orderness_ms=1000)
>>> clocks.advance(None, {"a": 50_000, "b": 10_000}, now_ms=0).watermark_ms
9000
>>> step = clocks.advance(9000, {"a": 80_000}, now_ms=60_000)  # "b" silent for a minute
>>> step.watermark_ms, step.became_idle
(79000, ('b',))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ._duration import to_ms
from ._spec import spec_fields, spec_ms
from .contract import LONGS, STRINGS

__all__ = ["GLOBAL", "PER_PARTITION", "WATERMARK_MODES", "WatermarkPolicy", "PartitionClocks", "WatermarkStep", "running_max_ms"]

GLOBAL = STRINGS["GLOBAL"]
PER_PARTITION = STRINGS["PER_PARTITION"]
WATERMARK_MODES = (GLOBAL, PER_PARTITION)


@dataclass(frozen=True)
class WatermarkPolicy:
    """``"global"`` (the default: max valid event time of every record minus ``B``) or
    ``"per_partition"`` (the minimum over the active source partitions of their own maximum
    minus ``B``); ``idle_timeout_ms`` (per-partition only) declares a partition idle when no
    batch has had a record or heartbeat of it for that long.

    >>> WatermarkPolicy("per_partition", idle_timeout_ms="90 seconds").idle_timeout_ms
    90000
    """

    mode: str = GLOBAL
    idle_timeout_ms: Any = None
    #: Per-partition only: the partitions the source will deliver (e.g. a Kafka topic's). Each
    #: holds the watermark back from the query's first batch until it delivers a record, or
    #: until ``idle_timeout`` has passed without one (Flink's per-split watermarks).
    source_partitions: Any = ()

    def __post_init__(self) -> None:
        if not isinstance(self.mode, str):
            raise TypeError(f"watermark must be one of {WATERMARK_MODES}, got {type(self.mode).__name__} {self.mode!r}")
        if self.mode not in WATERMARK_MODES:
            raise ValueError(f"watermark must be one of {WATERMARK_MODES}, got {self.mode!r}")
        if self.idle_timeout_ms is not None:
            if self.mode != PER_PARTITION:
                raise ValueError(
                    f"idle_timeout is only meaningful with watermark='per_partition', got watermark={self.mode!r}"
                )
            idle = to_ms(self.idle_timeout_ms, "idle_timeout")
            if idle <= 0:
                raise ValueError(f"idle_timeout must be > 0, got {idle} ms")
            object.__setattr__(self, "idle_timeout_ms", idle)
        listed = self.source_partitions
        if isinstance(listed, (str, bytes)) or not isinstance(listed, (list, tuple, set, frozenset, range)):
            raise TypeError(f"source_partitions must be a list of partition names, got "
                            f"{type(listed).__name__} {listed!r}")
        if listed and (self.mode != PER_PARTITION or self.idle_timeout_ms is None):
            raise ValueError(
                f"source_partitions={list(listed)!r} needs watermark='per_partition' and an idle_timeout (a listed "
                f"partition that never delivers would otherwise hold every window back for ever); got "
                f"watermark={self.mode!r}, idle_timeout={self.idle_timeout_ms!r}")
        object.__setattr__(self, "source_partitions", tuple(sorted({_text(p) for p in listed})))

    @property
    def per_partition(self) -> bool:
        return self.mode == PER_PARTITION

    def to_dict(self) -> dict:
        data = {"mode": self.mode, "idle_timeout_ms": self.idle_timeout_ms}
        return {**data, "source_partitions": list(self.source_partitions)} if self.source_partitions else data

    @classmethod
    def from_dict(cls, data: Any) -> "WatermarkPolicy":
        """The policy of a :meth:`to_dict` object (``None``: the default, global).

        >>> WatermarkPolicy.from_dict({"mode": "per_partition", "idle_timeout_ms": 60000})
        WatermarkPolicy(mode='per_partition', idle_timeout_ms=60000, source_partitions=())
        """
        if data is None:
            return cls()
        spec_fields(data, "watermark", optional=("mode", "idle_timeout_ms", "source_partitions"))
        return cls(data.get("mode", GLOBAL), idle_timeout_ms=spec_ms(data, "idle_timeout_ms", "watermark", None),
                   source_partitions=data.get("source_partitions", ()))


def running_max_ms(watermark_ms: int, max_out_of_orderness_ms: int) -> Optional[int]:
    """The largest valid event time of the batches before, from the global watermark ``W =
    max - B`` they left: ``W + B``, or ``None`` before the first watermark and at the end of
    input (the lateness advisor's delays are measured behind it; the JVM's ``Spec.runningMax``).

    >>> running_max_ms(50_000, 10_000), running_max_ms(0, 10_000)
    (60000, None)
    """
    if 0 < watermark_ms < LONGS["END_OF_INPUT_MS"]:
        return watermark_ms + max_out_of_orderness_ms
    return None


@dataclass(frozen=True)
class WatermarkStep:
    """The outcome of one batch: the new watermark and what changed among the partitions."""

    watermark_ms: Optional[int]
    #: Partitions declared idle / active again at the end of this batch (sorted by their text).
    became_idle: tuple = ()
    became_active: tuple = ()
    #: The hold-back: the largest valid event time of all partitions minus the watermark
    #: (``B`` plus how far the slowest active partition is behind; ``None`` before any record).
    holdback_ms: Optional[int] = None


class PartitionClocks:
    """Per partition ``p``: ``max_p`` (largest valid event time of its records and
    heartbeats) and ``seen_p`` (processing time of the last batch that had one), and which
    partitions are idle. :meth:`advance` applies one batch (docs/semantics.md)."""

    def __init__(self, policy: WatermarkPolicy, max_out_of_orderness_ms: int) -> None:
        if not isinstance(policy, WatermarkPolicy):
            raise TypeError(f"policy must be a WatermarkPolicy, got {type(policy).__name__}")
        self.policy = policy
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        self.max_ms: dict[Any, int] = {}
        self.seen_ms: dict[Any, int] = {}
        self.idle: set = set()
        self.started_ms: Optional[int] = None  # the first batch's processing time

    def advance(self, watermark_ms: Optional[int], batch_max_ms: Mapping[Any, Optional[int]], now_ms: int) -> WatermarkStep:
        """``W' = max(W, min over active p of (max_p - B))``, floored at 0; with no active
        partition ``W`` does not move. ``batch_max_ms``: each partition's largest valid event
        time in this batch (``None``: only invalid records, which never count)."""
        if self.started_ms is None:
            self.started_ms = now_ms
        for p, ms in batch_max_ms.items():
            if ms is None:
                continue
            self.max_ms[p] = ms if p not in self.max_ms else max(self.max_ms[p], ms)
            self.seen_ms[p] = now_ms
        timeout = self.policy.idle_timeout_ms
        idle = {p for p, seen in self.seen_ms.items() if timeout is not None and now_ms - seen >= timeout}
        became_idle = tuple(sorted(idle - self.idle, key=_text))
        became_active = tuple(sorted(self.idle - idle, key=_text))
        self.idle = idle
        active = [self.max_ms[p] for p in self.max_ms if p not in idle]
        new = watermark_ms
        if active and not self.waiting(now_ms):
            candidate = max(0, min(active) - self.max_out_of_orderness_ms)
            new = candidate if watermark_ms is None else max(watermark_ms, candidate)
        holdback = None
        if self.max_ms and new is not None:
            holdback = max(self.max_ms.values()) - new
        return WatermarkStep(new, became_idle, became_active, holdback)

    def waiting(self, now_ms: int) -> tuple:
        """The listed partitions (``policy.source_partitions``) that hold the watermark back at ``now_ms``:
        no record of theirs yet, and ``idle_timeout`` not passed since the first batch."""
        listed = self.policy.source_partitions
        if not listed or self.started_ms is None or now_ms - self.started_ms >= self.policy.idle_timeout_ms:
            return ()
        delivered = {_text(p) for p in self.max_ms}
        return tuple(p for p in listed if p not in delivered)

    def to_json(self) -> dict:
        """The state as JSON (partition names as text: the Spark engine's partitions are text)."""
        return {
            "partitions": {_text(p): [self.max_ms[p], self.seen_ms[p]] for p in self.max_ms},
            "idle": sorted(_text(p) for p in self.idle),
            "started_ms": self.started_ms,
        }

    @classmethod
    def from_json(cls, policy: WatermarkPolicy, max_out_of_orderness_ms: int, data: dict) -> "PartitionClocks":
        clocks = cls(policy, max_out_of_orderness_ms)
        for name, (max_ms, seen_ms) in data.get("partitions", {}).items():
            p = None if name == _NULL else name
            clocks.max_ms[p] = int(max_ms)
            clocks.seen_ms[p] = int(seen_ms)
        clocks.idle = {None if name == _NULL else name for name in data.get("idle", [])}
        clocks.started_ms = data.get("started_ms")
        return clocks


_NULL = "null"


def _text(partition: Any) -> str:
    return _NULL if partition is None else str(partition)
