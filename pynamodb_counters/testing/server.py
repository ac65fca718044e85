"""A moto DynamoDB server on the loopback interface that serves one request at a time.

moto's DynamoDB backend is not safe under concurrent transactions: every
``TransactWriteItems`` deep-copies the tables it touches and restores the copy
when the transaction is cancelled, so two overlapping transactions can undo
each other's writes (counter drift), trip over dictionaries changing size
(``RuntimeError``) or answer HTTP 500.  :class:`ServedMoto` restores the
per-request atomicity that real DynamoDB guarantees by holding one process-wide
lock while moto handles a request *and* while its response body is produced.
Still under that lock, it empties the lists in which moto keeps every object it
ever built (for its dashboard), so that a long run does not grow without bound.

Typical use::

    with ServedMoto() as server:
        client = boto3.client(
            "dynamodb",
            endpoint_url=server.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        ...
        server.reset()

.. note::
   moto keeps its state in process-wide globals.  Every :class:`ServedMoto` in
   a process therefore serves the *same* tables, and so does an in-process
   ``moto.mock_aws`` that is active at the same time: they share state,
   :meth:`ServedMoto.reset` also wipes what ``mock_aws`` created, and leaving
   ``mock_aws`` wipes the served tables.  The server is meant to run while
   ``mock_aws`` is *not* active.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable, List, Optional, Type, Union

from .backups import back_up_touched_items

if TYPE_CHECKING:
    from types import TracebackType

    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler

__all__ = ["ServedMoto"]

_HOST = "127.0.0.1"

#: moto's backends are process-wide, so the serialisation must be too.
_MOTO_LOCK = threading.Lock()

#: Paths under this prefix are moto's own control API, not AWS calls.
_MOTO_API_PREFIX = "/moto-api"

_READY_TRIES = 50
_CONTROL_TIMEOUT = 10.0
_READY_BACKOFF = 0.02
_POLL_INTERVAL = 0.05


class _SerialisedApp:
    """WSGI callable that runs a wrapped application one request at a time.

    The whole response body is materialised while the lock is held, so lazy
    response iterators cannot observe another request's half-applied state.

    :param app: the WSGI application to serialise (moto's dispatcher).
    :param latency: seconds to wait before each request, outside the lock.
    """

    def __init__(self, app: WSGIApplication, latency: float) -> None:
        self._app = app
        self._latency = latency
        self._count_lock = threading.Lock()
        self.requests_served = 0

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Handle one WSGI request under the process-wide moto lock."""
        if self._latency > 0:
            time.sleep(self._latency)
        with _MOTO_LOCK:
            app_iter = self._app(environ, start_response)
            try:
                body: List[bytes] = list(app_iter)
            finally:
                close = getattr(app_iter, "close", None)
                if close is not None:
                    close()
                _forget_model_instances()
        if not str(environ.get("PATH_INFO", "")).startswith(_MOTO_API_PREFIX):
            with self._count_lock:
                self.requests_served += 1
        return body


def _forget_model_instances() -> None:
    """Drop the references moto keeps to every model instance it ever built (for its dashboard,
    ``/moto-api/data.json``), the table copies of each ``TransactWriteItems`` among them: without this a long
    run grows by megabytes per transaction on a large table. moto's own ``reset_model_data()`` does it; on moto
    releases without it, the same is done on every tracked class."""
    try:
        from moto.core.model_instances import reset_model_data
    except ImportError:  # pragma: no cover - depends on the moto release
        _clear_instances_tracked()
    else:
        reset_model_data()


def _clear_instances_tracked() -> None:  # pragma: no cover - depends on the moto release
    """Empty ``instances_tracked`` on every subclass of moto's ``BaseModel`` (moto releases without
    ``moto.core.model_instances``)."""
    try:
        from moto.core.common_models import BaseModel
    except ImportError:
        return
    pending = list(BaseModel.__subclasses__())
    seen = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if isinstance(cls.__dict__.get("instances_tracked"), list):
            cls.instances_tracked = []
        pending.extend(cls.__subclasses__())


def _build_moto_app() -> WSGIApplication:
    """Build moto's multi-service WSGI dispatcher.

    :raises ImportError: if moto's server extra (``moto[server]``) is missing.
    """
    try:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            create_backend_app,
        )
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("ServedMoto needs moto's server extra: pip install 'moto[server]'") from exc
    app: WSGIApplication = DomainDispatcherApplication(create_backend_app)
    return app


def _quiet_handler() -> Type[WSGIRequestHandler]:
    """Return moto's request handler (werkzeug's, on moto releases without one), minus werkzeug's per-request
    log line. moto's handler only keeps S3 headers with underscores; DynamoDB needs nothing of it."""
    try:
        from moto.moto_server.werkzeug_app import MotoRequestHandler as Base
    except ImportError:  # moto before 5.2 (the last releases for Python 3.9)
        from werkzeug.serving import WSGIRequestHandler as Base

    class _QuietHandler(Base):  # type: ignore[misc]
        # Set here rather than letting werkzeug set it on moto's shared class.
        # (werkzeug answers ``Connection: close`` anyway: no keep-alive.)
        protocol_version = "HTTP/1.1"

        def log_request(self, code: Union[int, str] = "-", size: Union[int, str] = "-") -> None:
            """Do not log every request (werkzeug would print to stderr)."""

    return _QuietHandler


def _bind(port: int) -> socket.socket:
    """Open a listening TCP socket on the loopback interface.

    :raises RuntimeError: if the port cannot be bound.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((_HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise RuntimeError(
            f"ServedMoto cannot listen on {_HOST}:{port}: {exc.strerror or exc} (is the port already in use?)"
        ) from exc
    return sock


class ServedMoto:
    """A moto DynamoDB server on 127.0.0.1 serving one request at a time.

    :param port: TCP port to listen on; ``0`` picks a free one.
    :param latency: fixed delay in seconds added to every request outside the
        serialisation lock, to imitate a network-bound DynamoDB in benchmarks.
    :param item_backups: while serving, moto's TransactWriteItems backs up only
        the items each transaction names, not every table
        (:func:`~pynamodb_counters.testing.backups.back_up_touched_items`): the same all-or-nothing outcome, in
        time that grows with the actions rather than with the tables, for test
        runs that write thousands of items. It changes moto in this process
        until :meth:`stop`.
    """

    def __init__(self, port: int = 0, *, latency: float = 0.0, item_backups: bool = False) -> None:
        if latency < 0:
            raise ValueError("latency must not be negative")
        self._port = port
        self._latency = latency
        self._item_backups = item_backups
        self._undo: Optional[Callable[[], None]] = None
        self._app: Optional[_SerialisedApp] = None
        self._server: Optional[BaseWSGIServer] = None
        self._thread: Optional[threading.Thread] = None
        self.endpoint_url = ""

    @property
    def latency(self) -> float:
        """The fixed delay, in seconds, added to every request outside the lock; settable while serving (seed a
        benchmark's tables fast, then measure with the delay)."""
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("latency must not be negative")
        self._latency = seconds
        if self._app is not None:
            self._app._latency = seconds

    @property
    def requests_served(self) -> int:
        """Number of AWS API requests answered since :meth:`start`.

        Requests to moto's own ``/moto-api`` (readiness checks, resets) are
        not counted.
        """
        return self._app.requests_served if self._app is not None else 0

    def start(self) -> ServedMoto:
        """Start serving in a daemon thread and wait until the server answers.

        :returns: this server, so that ``server = ServedMoto().start()`` works.
        :raises RuntimeError: if already started, if the port cannot be bound
            or if the server does not answer.
        """
        if self._server is not None:
            raise RuntimeError("ServedMoto is already started")
        from werkzeug.serving import make_server

        app = _SerialisedApp(_build_moto_app(), self._latency)
        handler = _quiet_handler()
        listener = _bind(self._port)
        try:
            # werkzeug duplicates the descriptor; binding ourselves avoids its
            # print-and-sys.exit() behaviour when the port is taken.
            server = make_server(
                _HOST,
                self._port,
                app,
                threaded=True,
                request_handler=handler,
                fd=listener.fileno(),
            )
        finally:
            listener.close()
        port = int(server.server_address[1])
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name=f"ServedMoto-{port}",
            daemon=True,
        )
        self._app, self._server, self._thread = app, server, thread
        self.endpoint_url = f"http://{_HOST}:{port}"
        if self._item_backups:  # once the port is bound: stop() undoes it
            self._undo = back_up_touched_items()
        thread.start()
        try:
            self._wait_ready(port, thread)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, port: int, thread: threading.Thread) -> None:
        """Poll the server with HTTP GETs until it answers.

        :raises RuntimeError: if it does not answer within a bounded number
            of tries, or if its thread died.
        """
        last_error: Optional[BaseException] = None
        for _ in range(_READY_TRIES):
            if not thread.is_alive():
                break
            try:
                status = _request(port, "GET", f"{_MOTO_API_PREFIX}/config")
            except (OSError, http.client.HTTPException) as exc:
                last_error = exc
            else:
                if 200 <= status < 300:
                    return
                last_error = RuntimeError(f"HTTP {status}")
            time.sleep(_READY_BACKOFF)
        raise RuntimeError(f"ServedMoto on {_HOST}:{port} did not answer: {last_error!r}")

    def stop(self) -> None:
        """Stop serving and release the port.

        moto's state is process-wide and is kept; see :meth:`reset`.
        """
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5.0)
        if self._undo is not None:
            self._undo()
            self._undo = None

    def reset(self) -> None:
        """Drop all moto state: every backend's tables and items, everywhere.

        Goes through ``POST /moto-api/reset`` (so it waits its turn behind
        requests in flight).  The lists in which moto tracks every model
        instance it builds (the table and item copies of each transaction
        among them) need no reset: the server empties them after every
        request, so its memory follows the data it holds, not the number of
        requests it served.

        :raises RuntimeError: if the server is not started or the reset fails.
        """
        if self._server is None:
            raise RuntimeError("ServedMoto is not started")
        port = int(self._server.server_address[1])
        status = _request(port, "POST", f"{_MOTO_API_PREFIX}/reset")
        if status != 200:
            raise RuntimeError(f"moto reset failed with HTTP {status}")

    def __enter__(self) -> ServedMoto:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()


def _request(port: int, method: str, path: str) -> int:
    """Send one body-less request to the server and return its HTTP status."""
    conn = http.client.HTTPConnection(_HOST, port, timeout=_CONTROL_TIMEOUT)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()
