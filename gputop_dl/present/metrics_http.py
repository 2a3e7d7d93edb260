"""The exporter's HTTP server: `/metrics` and `/` answer with the metrics page, any other path
with 404 (prometheus_client's own server answers every path, `/../../etc/passwd` included)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import Collector

PATHS = ("/", "/metrics")


class _Quiet(WSGIRequestHandler):
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

    httpd = make_server(host, port, only_metrics(make_wsgi_app(registry)), Server,
                        handler_class=_Quiet)
    t = threading.Thread(target=httpd.serve_forever, name="gputop-dl-metrics", daemon=True)
    t.start()
    return httpd, t
