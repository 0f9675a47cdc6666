"""The cooldown of the alerts: at most one event per ``(kind, reason or partition)`` per
cooldown; what is held back in between is counted and carried into the next event."""

from __future__ import annotations

import dataclasses

__all__ = ["Cooldowns"]


@dataclasses.dataclass
class _Held:
    last_sent_s: float | None = None
    suppressed_count: int = 0
    suppressed_batches: int = 0


class Cooldowns:
    """
    >>> gate = Cooldowns(cooldown_s=60)
    >>> gate.admit("late", "too_late", 3, now=0), gate.admit("late", "too_late", 2, now=10)
    ((True, 0, 0), (False, 0, 0))
    >>> gate.admit("late", "too_late", 4, now=61)  # sent, carrying the 2 held back in 1 batch
    (True, 2, 1)
    """

    def __init__(self, cooldown_s: float) -> None:
        self.cooldown_s = cooldown_s
        self._held: dict[tuple[str, str], _Held] = {}

    def admit(self, kind: str, reason: str, count: int, now: float) -> tuple[bool, int, int]:
        """Whether an event of ``count`` may be sent at ``now``: (send, carried count,
        carried batches); a held-back event adds its count to the next one's."""
        held = self._held.setdefault((kind, reason), _Held())
        if held.last_sent_s is None or now - held.last_sent_s >= self.cooldown_s:
            carried, batches = held.suppressed_count, held.suppressed_batches
            held.last_sent_s = now
            held.suppressed_count = held.suppressed_batches = 0
            return True, carried, batches
        held.suppressed_count += count
        held.suppressed_batches += 1
        return False, 0, 0
