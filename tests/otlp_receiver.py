"""A small OTLP/HTTP traces receiver on 127.0.0.1: what an OpenTelemetry collector would get.

It decodes each POSTed ``ExportTraceServiceRequest`` (protobuf, as opentelemetry-proto defines
it) and keeps its spans, flattened, with their resource's attributes, and every request whole
(``requests_taken``), which ``carried`` searches for what must never be sent (G-TRACE-1).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Received:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_id: str  # "" for a root
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: int  # 0 unset, 2 error
    service: str
    status_message: str = ""


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.requests = 0
        self.requests_taken: list[tuple[bytes, ExportTraceServiceRequest]] = []  # body, decoded
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                receiver._take(body, request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def _take(self, body: bytes, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            self.requests_taken.append((body, request))
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            Received(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                start_ns=span.start_time_unix_nano,
                                end_ns=span.end_time_unix_nano,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                status=span.status.code,
                                service=str(resource.get("service.name")),
                                status_message=span.status.message,
                            )
                        )

    def wait_for(self, count: int, within: float = 30.0) -> list[Received]:
        """The spans once at least ``count`` arrived (a bound on waiting, not a timing claim)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        with self._lock:
            return list(self.spans)


def carried(receiver: Receiver, secrets: dict[str, str]) -> list[str]:
    """Where each of ``secrets`` (a name: its value) is in what ``receiver`` was sent, in any of
    its spellings (``spellings``): in any text of any request (a span's or an event's name, an
    attribute's key or value, a status's description, a link, the resource, the scope), and in
    the bytes as they came. Empty when none is anywhere."""
    found = []
    with receiver._lock:
        taken = list(receiver.requests_taken)
    for name, value in secrets.items():
        forms = spellings(value)
        for n, (body, request) in enumerate(taken):
            for where, text in _texts(request, f"request {n}"):
                found += [f"{name} ({form!r}) in {where}: {text!r}" for form in forms
                          if form in text]  # fmt: skip
            found += [f"{name} ({form!r}) in the bytes of request {n}" for form in forms
                      if form.encode() in body]  # fmt: skip
    return found


def spellings(value: str, window: int = 12) -> list[str]:
    """``value`` (an ASCII marker) as a span could carry it: whole, in any case, each run of
    ``window`` characters of it (a part of it, a value cut short), its UTF-8 in hex, and its
    base64 (standard and URL-safe) at each of the three alignments it can have inside a longer
    text (the characters that depend on it alone: the arguments' JSON encoded whole, say)."""
    forms = {value, value.upper(), value.lower(), value.encode().hex()}
    forms |= {value[i : i + window] for i in range(len(value) - window + 1)}
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * pad + value.encode()).decode()
            forms.add(encoded[4 if pad else 0 : -4])
    return sorted(form for form in forms if len(form) >= window)


def _texts(message: Message, where: str) -> Iterable[tuple[str, str]]:
    """Every text (and bytes, as Latin-1) field of ``message`` at any depth, with its place."""
    for field, value in message.ListFields():
        items = value if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) \
            else [value]  # fmt: skip
        for n, item in enumerate(items):
            here = f"{where}.{field.name}[{n}]"
            if isinstance(item, Message):
                yield from _texts(item, here)
            elif isinstance(item, str):
                yield here, item
            elif isinstance(item, bytes):
                yield here, item.decode("latin-1")


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


@contextmanager
def trickling() -> Iterator[str]:
    """An endpoint that reads the request, then answers a byte at a time, never finishing: each
    read of its answer is quick, the whole of it never comes. Yields its URL."""
    server = socket.create_server(("127.0.0.1", 0))
    over = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(1 << 20)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            while not over.wait(0.05):
                conn.sendall(b"x")

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1/traces"
    finally:
        over.set()
        server.close()
