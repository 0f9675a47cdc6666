"""The frozen, validated options of one async enrichment step, and its failure reasons.

Pure Python (no Spark): :class:`~eventtime.enrich.engine.Enricher` runs the lookups with
them, :func:`eventtime.enrich_async` (``eventtime/enrich/spark.py``) in Spark's Python workers.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..core._duration import to_ms
from ..core.kinds import BAD_RESULT, BAD_VALUE, ENRICHMENT_FAILURE_REASONS, LOOKUP_ERROR, MISSING, TIMEOUT

__all__ = [
    "EnrichConfig",
    "ON_FAILURE_MODES",
    "TIMEOUT",
    "LOOKUP_ERROR",
    "MISSING",
    "BAD_RESULT",
    "BAD_VALUE",
    "FAILURE_REASONS",
    "reason_category",
    "check_lookup",
]

#: What happens to a record whose lookup failed: ``"null"`` (the value is null, the error
#: column says why) or ``"invalid"`` (also quarantined by ``with_event_time`` with reason
#: ``enrichment_failed``).
ON_FAILURE_MODES = ("null", "invalid")

# The error column's values start with one of these (the contract: core/kinds.py).
FAILURE_REASONS = ENRICHMENT_FAILURE_REASONS


def reason_category(error: Optional[str]) -> Optional[str]:
    """The failure reason of an error column's text (the part before ``":"``).

    >>> reason_category("lookup_error: ClientResponseError"), reason_category(None)
    ('lookup_error', None)
    """
    return None if error is None else error.split(":", 1)[0]


def check_lookup(lookup: Any, name: str = "lookup") -> Callable:
    """``lookup`` if it is an ``async def`` callable (a coroutine function, a ``functools.partial``
    of one, or an object whose ``__call__`` is one); TypeError otherwise."""
    call = getattr(lookup, "__call__", None)
    if inspect.iscoroutinefunction(lookup) or (
        call is not None and not inspect.isfunction(lookup) and inspect.iscoroutinefunction(call)
    ):
        return lookup
    raise TypeError(
        f"{name} must be an async function 'async def {name}(keys: list) -> list | dict', "
        f"got {type(lookup).__name__} {lookup!r}"
    )


def _int(name: str, value: Any, minimum: int, *, optional: bool = False) -> Optional[int]:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def _duration(name: str, value: Any, minimum: int, *, optional: bool = False) -> Optional[int]:
    if value is None and optional:
        return None
    ms = to_ms(value, name)
    if ms < minimum:
        raise ValueError(f"{name} must be >= {minimum} ms, got {value!r}")
    return ms


@dataclass(frozen=True)
class EnrichConfig:
    """How the lookups of one enrichment step run, per Python worker (one event loop each).

    * ``chunk_size``: distinct keys per ``lookup`` call (one multi-get request);
    * ``max_in_flight``: calls running at once (an ``asyncio.Semaphore``);
    * ``rate_limit``: calls started per second, at most (a leaky bucket of capacity 1,
      ``aiolimiter.AsyncLimiter(1, 1 / rate_limit)``: calls are spaced ``1 / rate_limit`` s
      apart, so any 1 s window holds at most ``rate_limit + 1``); ``None``: no limit;
    * ``timeout_ms``: the most one call may take (the wait for a slot is not counted);
    * ``retries``: further attempts of a chunk whose call raised or timed out, after
      ``backoff_ms * 2**attempt`` (capped by ``max_backoff_ms``; with ``jitter`` a random
      50-100 % of it, from ``random.Random(seed)``);
    * ``cache_ttl_ms``: successful values are kept this long per key (monotonic clock) and
      not looked up again; ``None``: no cache. ``cache_max_size`` bounds it (oldest first out);
    * ``ordered``: rows leave in input order; ``False``: a batch's rows leave as their
      chunk completes (event time and the watermark are not affected either way);
    * ``on_failure``: ``"null"`` or ``"invalid"`` (see :data:`ON_FAILURE_MODES`).

    Durations accept int milliseconds, ``timedelta`` or strings such as ``"2 seconds"``;
    they are stored as int ms.

    >>> cfg = EnrichConfig(chunk_size=50, rate_limit=100, timeout_ms="2 seconds")
    >>> cfg.timeout_ms, cfg.max_in_flight
    (2000, 8)
    >>> EnrichConfig(on_failure="drop")
    Traceback (most recent call last):
    ...
    ValueError: on_failure must be one of ('null', 'invalid'), got 'drop'
    """

    chunk_size: int = 100
    max_in_flight: int = 8
    rate_limit: Optional[float] = None
    timeout_ms: Any = 5_000
    retries: int = 2
    backoff_ms: Any = 100
    max_backoff_ms: Any = 5_000
    jitter: bool = True
    seed: Optional[int] = None
    cache_ttl_ms: Any = None
    cache_max_size: Optional[int] = 100_000
    ordered: bool = True
    on_failure: str = "null"

    def __post_init__(self) -> None:
        _int("chunk_size", self.chunk_size, 1)
        _int("max_in_flight", self.max_in_flight, 1)
        rate = self.rate_limit
        if rate is not None:
            if isinstance(rate, bool) or not isinstance(rate, (int, float)):
                raise TypeError(f"rate_limit must be a number of requests per second or None, got {type(rate).__name__} {rate!r}")
            if not rate > 0 or rate == float("inf"):
                raise ValueError(f"rate_limit must be a finite number > 0 (requests per second), got {rate!r}")
            object.__setattr__(self, "rate_limit", float(rate))
        object.__setattr__(self, "timeout_ms", _duration("timeout_ms", self.timeout_ms, 1))
        _int("retries", self.retries, 0)
        object.__setattr__(self, "backoff_ms", _duration("backoff_ms", self.backoff_ms, 0))
        object.__setattr__(self, "max_backoff_ms", _duration("max_backoff_ms", self.max_backoff_ms, 0))
        if self.max_backoff_ms < self.backoff_ms:
            raise ValueError(f"max_backoff_ms must be >= backoff_ms ({self.backoff_ms}), got {self.max_backoff_ms!r}")
        for name in ("jitter", "ordered"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__} {getattr(self, name)!r}")
        _int("seed", self.seed, -(2**63), optional=True)
        object.__setattr__(self, "cache_ttl_ms", _duration("cache_ttl_ms", self.cache_ttl_ms, 1, optional=True))
        _int("cache_max_size", self.cache_max_size, 1, optional=True)
        if not isinstance(self.on_failure, str):
            raise TypeError(f"on_failure must be a str, got {type(self.on_failure).__name__} {self.on_failure!r}")
        if self.on_failure not in ON_FAILURE_MODES:
            raise ValueError(f"on_failure must be one of {ON_FAILURE_MODES}, got {self.on_failure!r}")

    def backoff_s(self, attempt: int, draw: float = 1.0) -> float:
        """Seconds to wait before retry ``attempt + 1`` (``attempt`` counts from 0); ``draw``
        in [0, 1] is the jitter's random number (ignored without jitter).

        >>> EnrichConfig(backoff_ms=100, jitter=False).backoff_s(2)
        0.4
        """
        delay = min(self.max_backoff_ms, self.backoff_ms * 2**attempt) / 1000
        return delay * (0.5 + 0.5 * draw) if self.jitter else delay
