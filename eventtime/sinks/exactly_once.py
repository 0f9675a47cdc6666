"""What every transactional sink shares (the Delta sinks, :class:`~eventtime.sinks.BatchSink`
and so :class:`~eventtime.sinks.PostgresSink`): a batch is identified by ``(query_id,
batch_id)`` and written once; a write error is retried by one :class:`RetryPolicy`; a batch
that cannot be written raises a :class:`SinkError`, so Spark fails the query and re-runs the
batch on restart (nothing is lost)."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

__all__ = ["SinkError", "RetryPolicy", "check_batch"]


class SinkError(RuntimeError):
    """A sink could not write a micro-batch: ``batch_id``, ``query_id`` and the ``attempts`` made.
    Its kinds: :class:`eventtime.sinks.BatchSinkError`, :class:`eventtime.sinks.DeltaSinkError`."""

    def __init__(self, message: str, *, batch_id: int, query_id: str, attempts: int) -> None:
        super().__init__(message)
        self.batch_id = batch_id
        self.query_id = query_id
        self.attempts = attempts


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """``retries`` more attempts after the first, the n-th retry after
    ``min(max_backoff_s, backoff_s * 2**n)`` seconds.

    >>> policy = RetryPolicy(retries=3, backoff_s=0.5, max_backoff_s=1.5)
    >>> [policy.delay_s(n) for n in range(policy.retries)]
    [0.5, 1.0, 1.5]
    """

    retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 10.0

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, numbers.Integral):
            raise TypeError(f"retries must be an int, got {type(self.retries).__name__} {self.retries!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries!r}")
        object.__setattr__(self, "retries", int(self.retries))
        object.__setattr__(self, "backoff_s", _check_seconds("backoff_s", self.backoff_s))
        object.__setattr__(self, "max_backoff_s", _check_seconds("max_backoff_s", self.max_backoff_s))

    @property
    def attempts(self) -> int:
        return self.retries + 1

    def delay_s(self, retry: int) -> float:
        """The wait before retry number ``retry`` (0 for the first retry)."""
        return min(self.max_backoff_s, self.backoff_s * (2**retry))


def check_batch(batch_id: object, query_id: object) -> tuple[int, str]:
    """A batch's identity as the router hands it: an int ``batch_id >= 0`` and a non-empty
    ``query_id`` (``TypeError`` / ``ValueError`` naming the parameter)."""
    if isinstance(batch_id, bool) or not isinstance(batch_id, numbers.Integral):
        raise TypeError(f"batch_id must be an int, got {type(batch_id).__name__}")
    if batch_id < 0:
        raise ValueError(f"batch_id must be >= 0, got {batch_id}")
    if not isinstance(query_id, str):
        raise TypeError(f"query_id must be a str, got {type(query_id).__name__}")
    if not query_id.strip():
        raise ValueError(f"query_id must be a non-empty string, got {query_id!r}")
    return int(batch_id), query_id
