"""A small OTLP/HTTP traces receiver on 127.0.0.1: what an OpenTelemetry collector would get.

It decodes each POSTed ``ExportTraceServiceRequest`` (protobuf, as opentelemetry-proto defines
it) and keeps its spans, flattened, with their resource's attributes.
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                receiver._take(request)
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

    def _take(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
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
