"""What every transactional sink shares (the Delta sinks, :class:`~eventtime.sinks.BatchSink`
and so :class:`~eventtime.sinks.PostgresSink`): a batch is identified by ``(query_id,
batch_id)`` and written once; a call returns a :class:`WriteResult`; a write error is retried
by one loop, :func:`run_with_retries`, on a :class:`RetryPolicy`; a batch that cannot be
written raises a :class:`SinkError`, so Spark fails the query and re-runs the batch on restart
(nothing is lost). The test hook ``fault_injector(point)`` is called at the named stages of a
write with a :class:`FaultPoint`."""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import time
from typing import Any, Callable, Optional, TypeVar

__all__ = ["SinkError", "RetryPolicy", "WriteResult", "FaultPoint", "FaultInjector", "run_with_retries",
           "check_batch", "check_fault_injector"]

_T = TypeVar("_T")


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


def run_with_retries(
    policy: RetryPolicy,
    write: Callable[[int], _T],
    *,
    on_error: Callable[[Exception, int, Optional[float]], BaseException],
    give_up: Callable[[BaseException, int], SinkError],
    sleep: Callable[[float], None] = time.sleep,
) -> _T:
    """The retry loop of every transactional sink: ``write(attempt)`` for ``attempt`` 0, 1, ...
    until it returns, at most ``policy.attempts`` times; what it returns is returned.

    An ``Exception`` from ``write`` goes to ``on_error(exc, attempt, delay_s)``, ``delay_s``
    being the wait before the next attempt (``None`` after the last one). It cleans up, logs,
    and returns the error to report (``exc`` or its cause), or raises to stop here (an error
    no retry can fix). The loop then sleeps ``delay_s`` and tries again; after the last
    attempt it raises ``give_up(error, policy.attempts)`` from the last error.

    >>> def write(attempt):
    ...     if attempt < 2:
    ...         raise OSError(f"fault {attempt}")
    ...     return "written"
    >>> waits = []
    >>> run_with_retries(RetryPolicy(3, 0.5), write, on_error=lambda exc, attempt, delay: exc,
    ...                  give_up=lambda exc, n: SinkError(str(exc), batch_id=0, query_id="q", attempts=n),
    ...                  sleep=waits.append), waits
    ('written', [0.5, 1.0])
    """
    last: Optional[BaseException] = None
    for attempt in range(policy.attempts):
        try:
            return write(attempt)
        except Exception as exc:  # noqa: BLE001 - on_error says what is retried
            delay = policy.delay_s(attempt) if attempt < policy.retries else None
            last = on_error(exc, attempt, delay)
        if delay is not None:
            sleep(delay)
    raise give_up(last, policy.attempts) from last


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """What one call of a transactional sink did (every one returns it).

    ``written``: a commit was made; otherwise ``skipped`` says why (``"empty"`` or
    ``"already_committed"``). ``rows``: rows written (rows the store refused excluded);
    ``attempts``: write attempts (transactions begun), from 1; ``duration_s``: the call's wall
    time. The Delta sinks also give ``version``, the table version after the call (``None``
    when the table does not exist); :class:`~eventtime.sinks.BatchSink` gives ``chunks`` (of the
    committed attempt), ``statement_retries`` (chunk statements retried alone,
    ``replay=False``) and ``rejected`` (the refused rows, :class:`~eventtime.sinks.RejectedRow`).
    A field a sink does not fill keeps its default.

    >>> result = WriteResult(True, rows=3, attempts=1, version=7)
    >>> result.written, result.rows, result.version, result.chunks, result.rejected
    (True, 3, 7, 0, ())
    """

    written: bool
    rows: int
    attempts: int = 0
    skipped: Optional[str] = None
    version: Optional[int] = None
    duration_s: float = 0.0
    chunks: int = 0
    statement_retries: int = 0
    rejected: tuple = ()


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


@dataclasses.dataclass(frozen=True)
class FaultPoint:
    """Where a transactional sink is in writing a batch: what its ``fault_injector`` test hook
    is called with (``fault_injector(point)``; raising from it simulates a fault there).

    ``stage`` names the point, ``batch_id`` the batch, ``attempt`` counts from 0 (the first
    attempt; a result's ``attempts`` counts from 1), ``chunk`` is the chunk's number at a
    ``"chunk"`` stage and ``None`` elsewhere. The stages, in the order one attempt meets them:

    * the Delta sinks (:class:`~eventtime.sinks.delta_write.DeltaSink`): ``"write"``, before
      each write attempt (before the table's transaction version is read);
    * :class:`~eventtime.sinks.BatchSink` (so :class:`~eventtime.sinks.PostgresSink`):
      ``"begin"`` (transaction begun), ``"chunk"`` (before each chunk), ``"before_commit"``,
      ``"after_commit"``.

    >>> def drop_the_third_chunk(point):
    ...     if point.stage == "chunk" and point.chunk == 2 and point.attempt == 0:
    ...         raise ConnectionError("simulated")
    >>> drop_the_third_chunk(FaultPoint("chunk", batch_id=0, attempt=0, chunk=2))
    Traceback (most recent call last):
    ...
    ConnectionError: simulated
    """

    stage: str
    batch_id: int
    attempt: int
    chunk: Optional[int] = None


FaultInjector = Callable[[FaultPoint], None]


def check_fault_injector(fault_injector: Any) -> Optional[FaultInjector]:
    """``fault_injector`` when it is ``None`` or callable with one :class:`FaultPoint`, else
    ``TypeError`` naming it (also for a hook of the earlier signatures, ``f(batch_id, attempt)``
    and ``f(stage, batch_id, attempt, chunk)``).

    >>> check_fault_injector(lambda point: None) is not None
    True
    >>> check_fault_injector(lambda batch_id, attempt: None)
    Traceback (most recent call last):
    ...
    TypeError: fault_injector must be callable as fault_injector(point) ... but it takes (batch_id, attempt)
    """
    if fault_injector is None:
        return None
    if not callable(fault_injector):
        raise TypeError(f"fault_injector must be callable(point: FaultPoint) or None, got "
                        f"{type(fault_injector).__name__} {fault_injector!r}")
    try:
        signature = inspect.signature(fault_injector)
    except (TypeError, ValueError):  # a signature that cannot be read: taken as it is
        return fault_injector
    try:
        signature.bind(None)
    except TypeError:
        raise TypeError(f"fault_injector must be callable as fault_injector(point) with one FaultPoint (point.stage, "
                        f".batch_id, .attempt, .chunk), but it takes {signature}") from None
    return fault_injector
