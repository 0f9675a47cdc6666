"""A multi-get lookup service on 127.0.0.1 (aiohttp, in a thread of the test process) that
measures how it is called, and the HTTP lookup the tests and the benchmark give enrich_async.

``POST /lookup {"keys": [...]}`` answers ``{"values": [value_of(k) for k in keys]}`` after
``latency_ms``. Scripted faults per key: ``fail_first[k] = n`` (the first n requests holding
k answer 500), ``slow_first[k] = n`` (the first n sleep ``slow_ms`` more, past the client's
timeout), ``always_fail`` / ``always_slow`` (every request holding k), ``unknown`` (k's value
is null). Measured: requests, the most requests in flight at once (in total and per client
process, header ``X-Worker``), every request's arrival time (per client process) and the
attempts per key.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections import Counter, defaultdict
from typing import Any, Optional


def value_of(key: Any) -> Optional[dict]:
    """The service's value of ``key``: typed fields (an int stays an int)."""
    text = str(key)
    return {"name": f"name-{text}", "score": sum(map(ord, text)) % 1000}


def max_in_window(times: list, window_s: float = 1.0) -> int:
    """The most timestamps in any half-open window ``[t, t + window_s)``."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


class LookupService:
    def __init__(self, latency_ms: float = 0.0) -> None:
        self.latency_ms = latency_ms
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self.reset()

    # -- configuration and measurements (called from the test thread) ----------------------
    def reset(self, latency_ms: Optional[float] = None, slow_ms: float = 2000.0, fail_first=None, slow_first=None,
              always_fail=(), always_slow=(), unknown=(), key_latency_ms=None) -> "LookupService":
        with self._lock:
            if latency_ms is not None:
                self.latency_ms = latency_ms
            self.slow_ms = slow_ms
            self.fail_first = dict(fail_first or {})
            self.slow_first = dict(slow_first or {})
            self.always_fail, self.always_slow, self.unknown = set(always_fail), set(always_slow), set(unknown)
            self.key_latency_ms = dict(key_latency_ms or {})  # extra latency of requests holding the key
            self.requests = 0
            self.errors_sent = 0
            self.in_flight = 0
            self.max_in_flight = 0
            self.worker_in_flight: Counter = Counter()
            self.worker_max_in_flight: Counter = Counter()
            self.times: dict = defaultdict(list)  # worker -> arrival times (monotonic s)
            self.attempts: Counter = Counter()  # key -> requests that held it
            self.keys_per_request: list = []
        return self

    def all_times(self) -> list:
        with self._lock:
            return [t for times in self.times.values() for t in times]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/lookup"

    # -- the server ----------------------------------------------------------------------
    async def _handle(self, request):
        from aiohttp import web

        body = await request.json()
        keys = body["keys"]
        worker = request.headers.get("X-Worker", "-")
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.worker_in_flight[worker] += 1
            self.worker_max_in_flight[worker] = max(self.worker_max_in_flight[worker], self.worker_in_flight[worker])
            self.times[worker].append(time.monotonic())
            self.keys_per_request.append(len(keys))
            attempt = {}
            for key in keys:
                self.attempts[key] += 1
                attempt[key] = self.attempts[key]
            fail = any(k in self.always_fail or attempt[k] <= self.fail_first.get(k, 0) for k in keys)
            slow = any(k in self.always_slow or attempt[k] <= self.slow_first.get(k, 0) for k in keys)
            delay = self.latency_ms + max([self.key_latency_ms.get(k, 0) for k in keys] or [0]) + (self.slow_ms if slow else 0)
        try:
            await asyncio.sleep(delay / 1000)
            if fail:
                with self._lock:
                    self.errors_sent += 1
                return web.json_response({"error": "scripted failure"}, status=503)
            return web.json_response({"values": [None if k in self.unknown else value_of(k) for k in keys]})
        finally:  # also when the client gave up (handler_cancellation=True cancels the handler)
            with self._lock:
                self.in_flight -= 1
                self.worker_in_flight[worker] -= 1

    def start(self) -> "LookupService":
        from aiohttp import web

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()

        def serve() -> None:
            loop = self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_post("/lookup", self._handle)
            self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
            loop.run_until_complete(self._runner.setup())
            loop.run_until_complete(web.SockSite(self._runner, sock, backlog=512).start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="lookup-service", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the lookup service did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    def __enter__(self) -> "LookupService":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class HttpLookup:
    """``async def lookup(keys) -> list``: one POST per chunk; 5xx raises ClientResponseError.

    One aiohttp session per event loop (the Spark workers keep theirs, and eventtime keeps
    the first lookup object a worker gets); not pickled."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._session = None
        self._loop = None

    def __getstate__(self) -> dict:
        return {"url": self.url}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["url"])

    async def __call__(self, keys: list) -> list:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            self._loop = loop
            self._session = aiohttp.ClientSession(headers={"X-Worker": str(os.getpid())},
                                                  connector=aiohttp.TCPConnector(limit=0))
        async with self._session.post(self.url, json={"keys": keys}) as response:
            response.raise_for_status()
            return (await response.json())["values"]

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
