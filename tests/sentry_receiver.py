"""A tiny Sentry envelope receiver for tests: an ``http.server`` on 127.0.0.1 in a thread.

It accepts ``POST /api/<project>/envelope/`` (gzip/deflate/identity bodies), decodes the
envelope items and keeps the ``event`` payloads. ``dsn`` points the real sentry-sdk HTTP
transport at it.

Usage::

    with SentryReceiver() as rx:
        alerter = Alerter(dsn=rx.dsn)
        ...
        events = rx.wait_for(1, timeout=10)
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def parse_envelope(body: bytes) -> tuple[dict[str, Any], list[tuple[dict[str, Any], bytes]]]:
    """Split an envelope into its header and ``(item_header, payload)`` pairs."""
    pos = body.find(b"\n")
    if pos < 0:
        return json.loads(body or b"{}"), []
    header = json.loads(body[:pos] or b"{}")
    pos += 1
    items = []
    while pos < len(body):
        end = body.find(b"\n", pos)
        if end < 0:
            end = len(body)
        line = body[pos:end].strip()
        pos = end + 1
        if not line:
            continue
        item_header = json.loads(line)
        length = item_header.get("length")
        if length is not None:
            payload = body[pos : pos + length]
            pos += length
            if pos < len(body) and body[pos : pos + 1] == b"\n":
                pos += 1
        else:
            end = body.find(b"\n", pos)
            if end < 0:
                end = len(body)
            payload = body[pos:end]
            pos = end + 1
        items.append((item_header, payload))
    return header, items


class SentryReceiver:
    """Collects Sentry envelopes sent to ``self.dsn``."""

    def __init__(self, status: int = 200, delay_s: float = 0.0) -> None:
        self.status = status
        self.delay_s = delay_s
        self.envelopes: list[tuple[dict[str, Any], list[tuple[dict[str, Any], bytes]]]] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                enc = (self.headers.get("Content-Encoding") or "").lower()
                if enc == "gzip":
                    body = gzip.decompress(body)
                elif enc == "deflate":
                    body = zlib.decompress(body)
                elif enc == "br":
                    import brotli  # type: ignore[import-not-found]

                    body = brotli.decompress(body)
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                parsed = parse_envelope(body)
                with receiver._cond:
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers)})
                    receiver.envelopes.append(parsed)
                    receiver._cond.notify_all()
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:  # silence
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.dsn = f"http://publickey@127.0.0.1:{self.port}/42"
        self._thread = threading.Thread(target=self._server.serve_forever, name="sentry-receiver", daemon=True)

    def start(self) -> "SentryReceiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "SentryReceiver":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def events(self) -> list[dict[str, Any]]:
        """The decoded ``event`` items received so far."""
        with self._lock:
            out = []
            for _header, items in self.envelopes:
                for item_header, payload in items:
                    if item_header.get("type") == "event":
                        out.append(json.loads(payload))
            return out

    def wait_for(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until at least ``n`` events arrived (or the timeout); return the events."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.events
            if len(events) >= n:
                return events
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return events
            with self._cond:
                self._cond.wait(min(remaining, 0.1))


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
