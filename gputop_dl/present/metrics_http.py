"""The exporter's HTTP server: where it listens (`--listen`), and `/metrics` and `/` answer with the metrics page, any other path
with 404 (prometheus_client's own server answers every path, `/../../etc/passwd` included).

Bounded: at most MAX_CONNECTIONS requests are served at once (one thread each; a connection
over the bound is closed at once), and a client that sends nothing for READ_TIMEOUT_S is
dropped, so idle sockets cannot pile up threads."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import Collector

from gputop_dl.errors import UsageError
from gputop_dl.schemas.metrics import DEFAULT_PORT as DEFAULT_PORT  # re-exported: `--listen`'s default

DEFAULT_HOST = "127.0.0.1"
PATHS = ("/", "/metrics")
MAX_CONNECTIONS = 16
READ_TIMEOUT_S = 5.0


class _Quiet(WSGIRequestHandler):
    timeout = READ_TIMEOUT_S  # socketserver sets it on the connection before the first read

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


def only_metrics(app: WSGIApplication) -> WSGIApplication:
    """A WSGI app that passes PATHS to `app` and answers 404 elsewhere."""
    def wrapped(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "") not in PATHS:
            body = b"not found: gputop-dl serves /metrics\n"
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8"),
                                              ("Content-Length", str(len(body)))])
            return [body]
        return app(environ, start_response)
    return wrapped


def start_server(port: int, host: str, registry: Collector
                 ) -> tuple[WSGIServer, threading.Thread]:
    """Serve `registry` on host:port in a daemon thread; returns (server, thread). OSError if
    the address cannot be bound."""
    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

        def process_request(self, request: Any, client_address: Any) -> None:
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)  # over the bound: closed, no thread
                return
            super().process_request(request, client_address)

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

    httpd = make_server(host, port, only_metrics(make_wsgi_app(registry)), Server,
                        handler_class=_Quiet)
    t = threading.Thread(target=httpd.serve_forever, name="gputop-dl-metrics", daemon=True)
    t.start()
    return httpd, t


def parse_listen(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT`, `PORT`, `HOST` or `[IPv6]:PORT` -> (host, port); raises UsageError.
    HOST is an IP address or `localhost`; an empty host means 127.0.0.1; port 0 = any free."""
    t = text.strip()
    host, port_s = t, ""
    if t.startswith("["):
        end = t.find("]")
        host, rest = (t[1:end], t[end + 1:]) if end > 0 else (t, "?")
        if rest and not rest.startswith(":"):
            raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:{default_port}")
        port_s = rest[1:]
    elif t.count(":") == 1:
        host, port_s = t.split(":")
    elif t.isascii() and t.isdigit():
        host, port_s = "", t
    host = host or DEFAULT_HOST
    if port_s:
        if not (port_s.isascii() and port_s.isdigit()) or not 0 <= int(port_s) <= 65535:
            raise UsageError(f"--listen {text!r}: port {port_s!r} is not a number from 0 to 65535")
        port = int(port_s)
    else:
        port = default_port
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise UsageError(f"--listen {text!r}: {host!r} is not an IP address (e.g. 127.0.0.1, "
                             f"0.0.0.0, ::1); expected HOST:PORT") from None
    return host, port


class MetricsServer:
    """`/metrics` over HTTP for one collector, in a daemon thread (prometheus_client's WSGI
    server). `start` raises UsageError for an address that cannot be bound."""

    def __init__(self, collector: Collector, listen: str):
        self.collector = collector
        self.host, self.port = parse_listen(listen)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.registry.register(ProcessCollector(registry=None))  # the exporter's own CPU, RSS
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "MetricsServer":
        try:
            self._httpd, self._thread = start_server(self.port, self.host, self.registry)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise UsageError(f"cannot serve metrics on {self.host}:{self.port}: {why}") from None
        self.port = self._httpd.server_address[1]  # the real one when port 0 was asked for
        return self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
