"""A per-worker in-memory cache of looked-up values with a time to live per key."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional

__all__ = ["TTLCache", "MISS"]

#: What :meth:`TTLCache.get` returns for an absent or expired key (``None`` is a value).
MISS = object()


class TTLCache:
    """Values by key, each kept ``ttl_ms`` after it was put (monotonic clock); at most
    ``max_size`` keys, the oldest put leaving first.

    >>> now = [0.0]
    >>> cache = TTLCache(ttl_ms=1000, max_size=2, clock=lambda: now[0])
    >>> cache.put("a", 1); cache.put("b", None)
    >>> cache.get("a"), cache.get("b")
    (1, None)
    >>> now[0] = 1.5
    >>> cache.get("a") is MISS
    True
    """

    def __init__(self, ttl_ms: int, max_size: Optional[int] = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_ms / 1000
        self.max_size = max_size
        self._clock = clock
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> Any:
        item = self._items.get(key)
        if item is None:
            return MISS
        if item[0] <= self._clock():
            del self._items[key]
            return MISS
        return item[1]

    def put(self, key: Hashable, value: Any) -> None:
        self._items.pop(key, None)
        self._items[key] = (self._clock() + self.ttl_s, value)
        if self.max_size is not None:
            while len(self._items) > self.max_size:
                self._items.popitem(last=False)
