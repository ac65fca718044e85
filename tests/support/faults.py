"""A fault-injecting loopback HTTP proxy for the test suite.

:class:`FaultProxy` sits between botocore and a DynamoDB endpoint (usually a
:class:`~pynamodb_counters.testing.server.ServedMoto`) and injects faults at
the transport: lost responses, connection resets, error answers and delays.
No library is mocked, so botocore's real retry, timeout and error-parsing
code runs against the faults.

Faults are values of :class:`Fault`; use the ready-made constants
(:data:`LOSE_RESPONSE`, :data:`RESET_BEFORE`, :data:`THROTTLE`,
:data:`SERVER_ERROR`, :data:`CONFLICT`) or the constructors :func:`answer`,
:func:`conflict` and :func:`delay`.
"""

from __future__ import annotations

import enum
import http.client
import json
import random
import socket
import socketserver
import struct
import sys
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    cast,
)
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "CONFLICT",
    "LOSE_RESPONSE",
    "RESET_BEFORE",
    "SERVER_ERROR",
    "THROTTLE",
    "Fault",
    "FaultKind",
    "FaultProxy",
    "answer",
    "conflict",
    "delay",
]

_HOST = "127.0.0.1"
_ERROR_TYPE_PREFIX = "com.amazonaws.dynamodb.v20120810#"
_JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
_UPSTREAM_TIMEOUT = 60.0
_POLL_INTERVAL = 0.05
#: Hop-by-hop headers, which must not be passed on, and Content-Length,
#: which the proxy sets itself (bodies are always sent whole).
_NOT_COPIED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)

_Headers = List[Tuple[str, str]]


class FaultKind(enum.Enum):
    """What the proxy does to a request that a fault applies to."""

    #: Forward (the server commits), then close without sending a response.
    LOSE_RESPONSE = "lose_response"
    #: Do not forward; reset the client connection (TCP RST).
    RESET_BEFORE = "reset_before"
    #: Do not forward; answer with a DynamoDB-style JSON error.
    ANSWER = "answer"
    #: Do not forward; answer ``TransactionCanceledException`` with a
    #: ``TransactionConflict`` reason, sized to the request's items.
    CONFLICT = "conflict"
    #: Forward, then hold the response back for a while.
    DELAY = "delay"


@dataclass(frozen=True)
class Fault:
    """One fault to inject; build it with the module's constants or constructors.

    :param kind: what to do with the request.
    :param name: key under which :attr:`FaultProxy.injected` counts it.
    :param status: HTTP status of an :attr:`FaultKind.ANSWER`.
    :param error_type: DynamoDB error name of an :attr:`FaultKind.ANSWER`.
    :param message: error message of an :attr:`FaultKind.ANSWER`.
    :param extra_json: JSON object merged into an answer's body.
    :param seconds: hold-back time of a :attr:`FaultKind.DELAY`.
    :param index: position of the conflicting item of a
        :attr:`FaultKind.CONFLICT`.
    """

    kind: FaultKind
    name: str
    status: int = 0
    error_type: str = ""
    message: str = ""
    extra_json: str = ""
    seconds: float = 0.0
    index: int = 0


def answer(
    status: int,
    error_type: str,
    message: str,
    extra: Optional[Mapping[str, Any]] = None,
    *,
    name: Optional[str] = None,
) -> Fault:
    """Build a fault that answers with a DynamoDB JSON error instead of forwarding.

    :param status: HTTP status code.
    :param error_type: error name, e.g. ``"ThrottlingException"``.
    :param message: the error's ``message``.
    :param extra: more fields for the JSON body, e.g. ``CancellationReasons``.
    :param name: counting key in :attr:`FaultProxy.injected`; defaults to
        ``error_type``.
    """
    return Fault(
        FaultKind.ANSWER,
        name or error_type,
        status=status,
        error_type=error_type,
        message=message,
        extra_json=json.dumps(dict(extra), sort_keys=True) if extra else "",
    )


def conflict(index: int = 0) -> Fault:
    """Build a fault that cancels a transaction with a conflict on one item.

    The proxy sizes ``CancellationReasons`` to the request's ``TransactItems``;
    ``index`` is clamped to the last item.  A request that has no
    ``TransactItems`` gets a plain ``TransactionConflictException``.

    :param index: position of the item reported as conflicting.
    """
    if index < 0:
        raise ValueError("index must not be negative")
    return Fault(FaultKind.CONFLICT, "CONFLICT", index=index)


def delay(seconds: float) -> Fault:
    """Build a fault that forwards the request and sends the response late.

    :param seconds: how long to hold the response back.
    """
    if seconds < 0:
        raise ValueError("seconds must not be negative")
    return Fault(FaultKind.DELAY, "DELAY", seconds=seconds)


LOSE_RESPONSE = Fault(FaultKind.LOSE_RESPONSE, "LOSE_RESPONSE")
RESET_BEFORE = Fault(FaultKind.RESET_BEFORE, "RESET_BEFORE")
THROTTLE = answer(
    400,
    "ThrottlingException",
    "Rate of requests exceeds the allowed throughput.",
    name="THROTTLE",
)
SERVER_ERROR = answer(500, "InternalServerError", "Internal server error", name="SERVER_ERROR")
CONFLICT = conflict()


@dataclass
class _Queued:
    """A queued fault and how many more matching requests it applies to."""

    fault: Fault
    remaining: int
    target: str


@dataclass
class _RandomFaults:
    """Settings and generator of :meth:`FaultProxy.set_random_faults`."""

    rate: float
    faults: Tuple[Fault, ...]
    rng: random.Random
    target: str


def _error_body(error_type: str, message: str, extra_json: str = "") -> bytes:
    """Serialise a DynamoDB JSON error body."""
    body: Dict[str, Any] = {
        "__type": _ERROR_TYPE_PREFIX + error_type,
        "message": message,
    }
    if extra_json:
        body.update(json.loads(extra_json))
    return json.dumps(body).encode("utf-8")


def _conflict_answer(fault: Fault, request_body: bytes) -> Tuple[int, bytes]:
    """Build the status and body a :attr:`FaultKind.CONFLICT` answers with."""
    try:
        items = json.loads(request_body.decode("utf-8")).get("TransactItems")
    except (ValueError, AttributeError):
        items = None
    if not isinstance(items, list) or not items:
        message = "Transaction is ongoing for the item"
        return 400, _error_body("TransactionConflictException", message)
    conflicting = min(fault.index, len(items) - 1)
    reasons: List[Dict[str, str]] = [{"Code": "None"} for _ in items]
    reasons[conflicting] = {
        "Code": "TransactionConflict",
        "Message": "Transaction is ongoing for the item",
    }
    codes = ", ".join(reason["Code"] for reason in reasons)
    message = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"
    extra = json.dumps({"CancellationReasons": reasons})
    return 400, _error_body("TransactionCanceledException", message, extra)


def _reset_connection(sock: socket.socket) -> None:
    """Close ``sock`` so that the peer sees a reset (RST) rather than EOF."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class _ProxyServer(ThreadingHTTPServer):
    """Threaded listener that knows the :class:`FaultProxy` it belongs to."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, proxy: FaultProxy) -> None:
        super().__init__((_HOST, 0), _ProxyHandler)
        self.proxy = proxy

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse-DNS lookup of the address."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = _HOST, int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that went away; report anything else."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _ProxyHandler(BaseHTTPRequestHandler):
    """Handles the requests of one client connection (keep-alive aware)."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle's
    # algorithm and delayed ACKs add ~40 ms to every injected answer.
    disable_nagle_algorithm = True

    @property
    def proxy(self) -> FaultProxy:
        """The proxy this handler works for."""
        return cast(_ProxyServer, self.server).proxy

    def setup(self) -> None:
        super().setup()
        self.proxy._track(self.connection, True)

    def finish(self) -> None:
        self.proxy._track(self.connection, False)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: no line on stderr per request."""

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        """Read one request, then inject a fault or forward it."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._send(411, "Length Required", [], b"")
            self.close_connection = True
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        proxy = self.proxy
        fault = proxy._pick(self.headers.get("X-Amz-Target", ""))
        kind = fault.kind if fault is not None else None
        if fault is not None and kind is FaultKind.RESET_BEFORE:
            proxy._record(fault)
            self.close_connection = True
            _reset_connection(self.connection)
            return
        if fault is not None and kind in (FaultKind.ANSWER, FaultKind.CONFLICT):
            proxy._record(fault)
            self._answer(fault, body)
            return
        try:
            status, reason, headers, data = proxy._forward(self.command, self.path, self.headers.items(), body)
        except (OSError, http.client.HTTPException) as exc:
            message = f"upstream failed: {exc!r}".encode()
            self._send(502, "Bad Gateway", [("Content-Type", "text/plain")], message)
            return
        if fault is not None:
            proxy._record(fault)
        if kind is FaultKind.LOSE_RESPONSE:
            self.close_connection = True
            return
        if fault is not None and kind is FaultKind.DELAY:
            if proxy._stopping.wait(fault.seconds):
                self.close_connection = True
                return
        self._send(status, reason, headers, data)

    def _answer(self, fault: Fault, request_body: bytes) -> None:
        """Answer with the DynamoDB error that ``fault`` describes."""
        if fault.kind is FaultKind.CONFLICT:
            status, body = _conflict_answer(fault, request_body)
        else:
            status = fault.status
            body = _error_body(fault.error_type, fault.message, fault.extra_json)
        headers = [
            ("Content-Type", _JSON_CONTENT_TYPE),
            ("x-amzn-RequestId", uuid.uuid4().hex.upper()),
        ]
        self._send(status, self.responses.get(status, ("Error",))[0], headers, body)

    def _send(self, status: int, reason: str, headers: _Headers, body: bytes) -> None:
        """Send a complete response with an exact ``Content-Length``."""
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in _NOT_COPIED:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


class FaultProxy:
    """A loopback HTTP/1.1 proxy that injects faults into chosen requests.

    Queued faults (:meth:`inject`) apply first, in the order queued; otherwise
    random faults (:meth:`set_random_faults`) may apply.  A fault applies to
    a request whose ``X-Amz-Target`` header ends with the fault's ``target``.

    :param upstream_url: ``http://host:port`` of the real endpoint.

    .. attribute:: forwarded

       Number of requests that reached upstream and were answered by it.

    .. attribute:: injected

       Fault name (:attr:`Fault.name`) to the number of times it was injected.
    """

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream_url must be http://host:port, got {upstream_url!r}")
        self._upstream = (parts.hostname, parts.port or 80)
        self._lock = threading.Lock()
        self._forwarded_changed = threading.Condition(self._lock)
        self._queue: List[_Queued] = []
        self._random: Optional[_RandomFaults] = None
        self._connections: Set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: Optional[_ProxyServer] = None
        self._thread: Optional[threading.Thread] = None
        self.endpoint_url = ""
        self.forwarded = 0
        self.injected: Dict[str, int] = {}

    def start(self) -> FaultProxy:
        """Start listening on a free loopback port, in a daemon thread.

        :returns: this proxy.
        """
        if self._server is not None:
            raise RuntimeError("FaultProxy is already started")
        self._stopping.clear()
        server = _ProxyServer(self)
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name="FaultProxy",
            daemon=True,
        )
        self._server, self._thread = server, thread
        self.endpoint_url = f"http://{_HOST}:{server.server_address[1]}"
        thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, interrupt delays and close client connections."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if thread is not None:
            thread.join(timeout=5.0)

    def inject(self, fault: Fault, *, times: int = 1, target: str = "TransactWriteItems") -> None:
        """Queue ``fault`` for the next ``times`` matching requests.

        :param fault: the fault to inject.
        :param times: how many matching requests it applies to.
        :param target: suffix of ``X-Amz-Target`` to match; ``""`` matches all.
        """
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._queue.append(_Queued(fault, times, target))

    def set_random_faults(
        self,
        rate: float,
        faults: Sequence[Fault],
        *,
        seed: int,
        target: str = "TransactWriteItems",
    ) -> None:
        """Inject a fault into a random share of matching requests.

        Each matching request draws from ``random.Random(seed)``, so the same
        sequence of requests gets the same faults.

        :param rate: probability in ``[0, 1]`` per request; ``0`` disables.
        :param faults: faults to choose from, uniformly.
        :param seed: seed of the generator.
        :param target: suffix of ``X-Amz-Target`` to match; ``""`` matches all.
        """
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be within [0, 1]")
        if rate > 0 and not faults:
            raise ValueError("faults must not be empty")
        settings = _RandomFaults(rate, tuple(faults), random.Random(seed), target) if rate > 0 else None
        with self._lock:
            self._random = settings

    def clear(self) -> None:
        """Drop queued and random faults (the counters are kept)."""
        with self._lock:
            self._queue.clear()
            self._random = None

    def wait_forwarded(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until :attr:`forwarded` reaches ``count``.

        Lets a test synchronise with a request the client gave up on (for
        example after a read timeout) without sleeping.

        :param count: the value to wait for.
        :param timeout: longest wait in seconds.
        :returns: whether the count was reached in time.
        """
        with self._forwarded_changed:
            return self._forwarded_changed.wait_for(lambda: self.forwarded >= count, timeout)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()

    # Used by the request handler.

    def _pick(self, amz_target: str) -> Optional[Fault]:
        """Choose the fault, if any, for a request with this ``X-Amz-Target``."""
        with self._lock:
            for queued in self._queue:
                if amz_target.endswith(queued.target):
                    queued.remaining -= 1
                    if queued.remaining == 0:
                        self._queue.remove(queued)
                    return queued.fault
            chance = self._random
            if chance is not None and amz_target.endswith(chance.target):
                if chance.rng.random() < chance.rate:
                    return chance.rng.choice(chance.faults)
        return None

    def _record(self, fault: Fault) -> None:
        """Count one injection of ``fault``."""
        with self._lock:
            self.injected[fault.name] = self.injected.get(fault.name, 0) + 1

    def _track(self, conn: socket.socket, is_open: bool) -> None:
        """Remember or forget_stored an open client connection."""
        with self._lock:
            if is_open:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _forward(self, method: str, path: str, headers: _Headers, body: bytes) -> Tuple[int, str, _Headers, bytes]:
        """Send the request upstream on a fresh connection; return its response."""
        conn = http.client.HTTPConnection(*self._upstream, timeout=_UPSTREAM_TIMEOUT)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() not in _NOT_COPIED:
                    conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
            result = (response.status, response.reason, response.getheaders(), data)
        finally:
            conn.close()
        with self._lock:
            self.forwarded += 1
            self._forwarded_changed.notify_all()
        return result
