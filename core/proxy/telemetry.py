"""The proxy's live telemetry: ``[telemetry] otlp = URL`` in the operator's configuration.

```toml
[telemetry]
otlp = "http://127.0.0.1:4318/v1/traces"   # OTLP/HTTP traces endpoint; absent: no telemetry
```

Rules:

1. The table is parsed here (``parse``): ``otlp`` is an ``http://`` or ``https://`` URL with a
   host; any other key or value is a ``ConfigError`` naming the line. Without the table nothing
   of OpenTelemetry is loaded (``start`` imports core/telemetry.py only when configured), so a
   proxy without telemetry starts as fast as before. Telemetry that cannot start (the SDK
   missing from an install) is logged, and the proxy serves without it.
2. ``start`` registers a ``SpanObserver`` on the proxy's store as it starts serving; ``stop``
   gives it ``STOP_WAIT`` seconds to send what is queued as the proxy exits (core/telemetry.py
   rule 1 says what is lost). The endpoint is read at start: a changed one takes effect at the
   next start.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from core.store import Store
    from core.telemetry import SpanObserver

log = logging.getLogger(__name__)

STOP_WAIT = 2.0
EXPORT_TIMEOUT = 2.0  # a request to a down endpoint is given up after this (retries included)


class _Where(Protocol):
    def error(self, key: tuple[str, ...], message: str) -> Exception: ...


def parse(document: dict[str, Any], where: _Where) -> str | None:
    """The OTLP endpoint the configuration names, or None."""
    table = document.get("telemetry")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise where.error(("telemetry",), "must be a table")
    for name in table:
        if name != "otlp":
            raise where.error(("telemetry", name), "unknown key (known here: otlp)")
    url = table.get("otlp")
    if url is None:
        return None
    if not isinstance(url, str) or not valid_url(url):
        raise where.error(("telemetry", "otlp"), f"{url!r} is not an http:// or https:// URL")
    return url


def valid_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def start(url: str | None, store: Store) -> SpanObserver | None:
    if url is None:
        return None
    try:
        from core import telemetry

        observer = telemetry.SpanObserver(store, telemetry.otlp(url, timeout=EXPORT_TIMEOUT))
    except Exception as e:  # a copy never stops the proxy: it serves without one
        log.error("telemetry to %s not started: %s: %s", url, type(e).__name__, e)
        return None
    store.observe(observer)
    return observer


def stop(observer: SpanObserver | None, store: Store) -> None:
    """What is queued is given ``STOP_WAIT`` seconds to be sent (core/telemetry.py rule 1)."""
    if observer is not None:
        store.flush_observers(STOP_WAIT)
