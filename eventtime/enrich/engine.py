"""The async enrichment machinery, on plain lists of keys (no Spark): chunks, in-flight cap,
rate limit, timeout, retries with backoff, a TTL cache and ordered / completion-order output.

One :class:`Enricher` per worker and step; it binds its semaphore and limiter to the event
loop it first runs on (the Spark adapter keeps one loop per Python worker and reuses it
across batches). No thread is started: a chunk is one task on that loop.

The lookup contract: ``async def lookup(keys: list) -> list | dict``, called with a chunk of
distinct, non-null keys. A list holds one value per key, in order (``None`` is a value); a
dict maps keys to values, and a key it lacks is ``missing``. Anything else, or a list of
another length, is ``bad_result`` for the chunk's keys (not retried: it is a bug, not an
outage). A call that raises or runs past the timeout is retried; when no attempt is left
its keys fail with ``timeout`` or ``lookup_error: <exception type>``. A null key is never
looked up: its value is null and it has no error.

>>> import asyncio
>>> async def lookup(keys):
...     return [k.upper() for k in keys]
>>> result = asyncio.run(Enricher(lookup, EnrichConfig(chunk_size=2)).enrich(["a", None, "b", "a", "c"]))
>>> result.values, result.errors
(['A', None, 'B', 'A', 'C'], [None, None, None, None, None])
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any, AsyncIterator, Callable, Mapping, NamedTuple, Optional

from .cache import MISS, TTLCache
from .config import BAD_RESULT, FAILURE_REASONS, LOOKUP_ERROR, MISSING, TIMEOUT, EnrichConfig, check_lookup, reason_category

__all__ = ["Enricher", "EnrichStats", "Part", "Enriched"]


class Part(NamedTuple):
    """Rows of one input resolved together: their positions in the input, values and errors."""

    indices: list
    values: list
    errors: list


class Enriched(NamedTuple):
    """The values and errors of every input row, in input order."""

    values: list
    errors: list


@dataclasses.dataclass
class EnrichStats:
    """Counters of one worker's enrichment: rows, rows with a null key, rows served from the
    cache, distinct keys looked up, lookup calls (attempts) and retries, failed rows by reason."""

    rows: int = 0
    null_keys: int = 0
    cache_hits: int = 0
    keys_looked_up: int = 0
    requests: int = 0
    retries: int = 0
    failed: dict = dataclasses.field(default_factory=dict)

    def add_failed(self, error: str, rows: int = 1) -> None:
        reason = reason_category(error)
        self.failed[reason] = self.failed.get(reason, 0) + rows

    def as_dict(self) -> dict:
        """Flat counts: the counters, ``failed`` (all reasons) and one entry per reason.

        >>> EnrichStats(rows=3, failed={"timeout": 1}).as_dict()["timeout"]
        1
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "failed"}
        out["failed"] = sum(self.failed.values())
        out.update({reason: self.failed.get(reason, 0) for reason in FAILURE_REASONS})
        return out


def _as_list(keys: Any) -> list:
    if hasattr(keys, "to_pylist"):  # a pyarrow Array / ChunkedArray
        return keys.to_pylist()
    return list(keys)


class Enricher:
    """Runs ``lookup`` over keys under an :class:`~eventtime.enrich.config.EnrichConfig`.

    ``await enricher.enrich(keys)`` gives every row's value and error in input order;
    ``enricher.parts(keys)`` yields them as they complete (rows needing no lookup first, then
    one :class:`Part` per chunk). Keys are deduplicated per call and, with a cache, across
    calls. ``stats`` counts what happened.
    """

    def __init__(self, lookup: Callable, config: Optional[EnrichConfig] = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.lookup = check_lookup(lookup)
        config = EnrichConfig() if config is None else config
        if not isinstance(config, EnrichConfig):
            raise TypeError(f"config must be an EnrichConfig, got {type(config).__name__} {config!r}")
        self.config = config
        self.stats = EnrichStats()
        self.cache = None if config.cache_ttl_ms is None else TTLCache(config.cache_ttl_ms, config.cache_max_size, clock)
        self._rng = random.Random(config.seed)
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # the semaphore and the limiter belong to one loop
            self._loop = loop
            self._slots = asyncio.Semaphore(self.config.max_in_flight)
            self._limiter = None
            if self.config.rate_limit is not None:
                from aiolimiter import AsyncLimiter

                # capacity 1: calls at least 1 / rate apart, never a burst
                self._limiter = AsyncLimiter(1, 1 / self.config.rate_limit)

    async def _call(self, keys: list) -> Any:
        async with self._slots:
            if self._limiter is not None:
                await self._limiter.acquire()
            self.stats.requests += 1
            return await asyncio.wait_for(self.lookup(list(keys)), self.config.timeout_ms / 1000)

    async def _chunk(self, keys: list) -> tuple[list, list, list]:
        """(keys, values, errors) of one chunk, after the retries."""
        config, error = self.config, None
        for attempt in range(config.retries + 1):
            if attempt:
                self.stats.retries += 1
                await asyncio.sleep(config.backoff_s(attempt - 1, self._rng.random()))
            try:
                result = await self._call(keys)
            except (asyncio.TimeoutError, TimeoutError):
                error = TIMEOUT
            except Exception as exc:  # noqa: BLE001 - any failure of the lookup is the key's error
                error = f"{LOOKUP_ERROR}: {type(exc).__name__}"
            else:
                return self._unpack(keys, result)
        return keys, [None] * len(keys), [error] * len(keys)

    def _unpack(self, keys: list, result: Any) -> tuple[list, list, list]:
        if isinstance(result, Mapping):
            values = [result.get(k, MISS) for k in keys]
            errors = [MISSING if v is MISS else None for v in values]
            values = [None if v is MISS else v for v in values]
        elif isinstance(result, (list, tuple)):
            if len(result) != len(keys):
                error = f"{BAD_RESULT}: {len(result)} values for {len(keys)} keys"
                return keys, [None] * len(keys), [error] * len(keys)
            values, errors = list(result), [None] * len(keys)
        else:
            error = f"{BAD_RESULT}: the lookup returned {type(result).__name__}, not a list or dict"
            return keys, [None] * len(keys), [error] * len(keys)
        if self.cache is not None:
            for key, value, err in zip(keys, values, errors):
                if err is None:
                    self.cache.put(key, value)
        return keys, values, errors

    async def parts(self, keys: Any) -> AsyncIterator[Part]:
        """Yield the rows of ``keys`` (a list or pyarrow array) as they are resolved."""
        self._bind()
        keys = _as_list(keys)
        pending: dict = {}  # key -> its rows
        ready = Part([], [], [])
        nulls = hits = 0
        for i, key in enumerate(keys):
            if key is None:
                nulls += 1
            else:
                try:
                    rows = pending.get(key)
                except TypeError:
                    raise TypeError(f"enrichment keys must be hashable (str, int, bytes, date...), got {type(key).__name__} {key!r}") from None
                if rows is not None:
                    rows.append(i)
                    continue
                value = MISS if self.cache is None else self.cache.get(key)
                if value is MISS:
                    pending[key] = [i]
                    continue
                hits += 1
            ready.indices.append(i)
            ready.values.append(None if key is None else value)
            ready.errors.append(None)
        self.stats.rows += len(keys)
        self.stats.null_keys += nulls
        self.stats.cache_hits += hits
        if ready.indices:
            yield ready
        unique = list(pending)
        self.stats.keys_looked_up += len(unique)
        size = self.config.chunk_size
        tasks = [asyncio.ensure_future(self._chunk(unique[j : j + size])) for j in range(0, len(unique), size)]
        try:
            for next_done in asyncio.as_completed(tasks):
                chunk_keys, values, errors = await next_done
                part = Part([], [], [])
                for key, value, error in zip(chunk_keys, values, errors):
                    rows = pending[key]
                    part.indices.extend(rows)
                    part.values.extend([value] * len(rows))
                    part.errors.extend([error] * len(rows))
                    if error is not None:
                        self.stats.add_failed(error, len(rows))
                yield part
        finally:
            unfinished = [task for task in tasks if not task.done()]
            for task in unfinished:
                task.cancel()
            if unfinished:
                await asyncio.gather(*unfinished, return_exceptions=True)

    async def enrich(self, keys: Any) -> Enriched:
        """Every row's value and error, in input order (see the module's contract)."""
        keys = _as_list(keys)
        values: list = [None] * len(keys)
        errors: list = [None] * len(keys)
        async for part in self.parts(keys):
            for i, value, error in zip(*part):
                values[i] = value
                errors[i] = error
        return Enriched(values, errors)
