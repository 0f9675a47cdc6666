"""The Sentry client of the alerts: a dedicated ``sentry_sdk.Client`` with its own ``Scope``.

The application's global SDK setup is untouched and no integrations are installed; a bad
DSN is refused when the client is made (at start, not mid-stream); sending and closing are
bounded by a timeout and never raise into the pipeline.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

__all__ = ["SentryClient"]

log = logging.getLogger("eventtime.alerts")


class SentryClient:
    """Events of one pipeline to one DSN.

    >>> SentryClient("not a dsn", pipeline="p")
    Traceback (most recent call last):
    ...
    ValueError: dsn is not a valid Sentry DSN ('not a dsn'): Unsupported scheme ''
    """

    def __init__(self, dsn: str, pipeline: str, environment: str | None = None, timeout_s: float = 2.0,
                 options: Mapping[str, Any] | None = None) -> None:
        import sentry_sdk
        from sentry_sdk.utils import BadDsn, Dsn

        try:
            Dsn(dsn)
        except BadDsn as exc:
            raise ValueError(f"dsn is not a valid Sentry DSN ({dsn!r}): {exc}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a bad port
            raise ValueError(f"dsn is not a valid Sentry DSN ({dsn!r}): {exc}") from None
        settings: dict[str, Any] = {
            "dsn": dsn,
            "default_integrations": False,
            "auto_enabling_integrations": False,
            "integrations": [],
            "send_client_reports": False,
            "enable_backpressure_handling": False,
            "shutdown_timeout": timeout_s,
            "max_breadcrumbs": 0,
            "spotlight": False,
        }
        if environment is not None:
            settings["environment"] = environment
        settings.update(options or {})
        try:
            self._client: Any = sentry_sdk.Client(**settings)
        except Exception as exc:  # noqa: BLE001 - configuration error, at start
            raise ValueError(f"dsn {dsn!r}: could not create the Sentry client: {exc}") from exc
        self._scope = sentry_sdk.Scope(client=self._client)
        self._scope.set_tag("pipeline", pipeline)
        self._scope.set_tag("eventtime.pipeline", pipeline)
        if environment is not None:
            self._scope.set_tag("environment", environment)
        self.timeout_s = timeout_s

    def capture(self, event: dict[str, Any]) -> str | None:
        """Queue one event; its id, or None once closed."""
        if self._client is None:
            return None
        return self._client.capture_event(event, scope=self._scope)

    def flush(self, timeout_s: float) -> None:
        if self._client is not None:
            self._client.flush(timeout=max(0.0, timeout_s))

    def close(self) -> None:
        """Flush (bounded by ``timeout_s``) and close; never raises."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close(timeout=self.timeout_s)
            except Exception:  # noqa: BLE001
                log.warning("eventtime: closing the Sentry client failed", exc_info=True)
