"""uvicorn serving an App's HTTP functions (and what is mounted beside them) in a thread."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from oncefire.errors import ConfigError

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from oncefire.app import App

log = logging.getLogger(__name__)
START_TIMEOUT = 30.0
EXIT_STUCK = 3  # as a worker process that ends itself over an attempt it could not stop


def bound(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for a server to listen on, or a ConfigError saying why
    not (the port is taken, the address is not this machine's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"Cannot listen on {host}:{port} ({reason}): choose another --host or --port."
        ) from exc
    return sock


class HttpServer:
    """The HTTP server of `oncefire run`: start() binds and serves, stop() drains and ends."""

    def __init__(self, app: App, host: str, port: int, mounts: Sequence[BaseRoute] = ()) -> None:
        import uvicorn

        from oncefire.web.http_functions import build_asgi
        from oncefire.web.requests import sweep_crashed

        swept = sweep_crashed(app)
        if swept:
            log.warning("recorded %d request(s) a stopped HTTP server left running", swept)
        self.host = host
        self.port = port
        self.grace = app.settings.shutdown_grace
        asgi = build_asgi(app, mounts)
        self._endpoints = asgi.state.endpoints
        config = uvicorn.Config(
            asgi,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=int(app.settings.shutdown_grace),
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL the server listens on."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Bind the port (ConfigError if it cannot be) and serve in a background thread."""
        sock = bound(self.host, self.port)
        self.port = sock.getsockname()[1]  # port 0 asks the system for a free one
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="oncefire-http"
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"The HTTP server on {self.url} did not start.")
            time.sleep(0.01)
        log.info("serving HTTP functions on %s", self.url)

    def stop(self) -> int:
        """Stop taking requests, let running ones answer, and end the thread; return how many
        plain functions still run past their timeout after the shutdown grace."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        stuck: int = self._endpoints.close(self.grace)
        if stuck:
            log.error("%d HTTP function(s) still run past their timeout and the grace", stuck)
        return stuck


def serve_beside(
    host: str, port: int, mounts: Sequence[BaseRoute] = ()
) -> Callable[[App], AbstractContextManager[object]]:
    """For `supervisor.serve(alongside=...)`: an HTTP server on the loaded app while the
    workers run."""

    @contextmanager
    def serving(app: App) -> Iterator[object]:
        server = HttpServer(app, host, port, mounts)
        server.start()
        try:
            yield server
        finally:
            if server.stop():
                # Their threads cannot be stopped and would keep this process from exiting.
                logging.shutdown()
                os._exit(EXIT_STUCK)

    return serving
