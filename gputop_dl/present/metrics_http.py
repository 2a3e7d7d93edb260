"""The exporter's HTTP server: `/metrics` and `/` answer with the metrics page, any other path
with 404 (prometheus_client's own server answers every path, `/../../etc/passwd` included).

Bounded: at most MAX_CONNECTIONS requests are served at once (one thread each; a connection
over the bound is closed at once), and a client that sends nothing for READ_TIMEOUT_S is
dropped, so idle sockets cannot pile up threads."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import Collector

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
