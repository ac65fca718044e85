"""
The transport seam: what sees every request the library sends, before DynamoDB does and after it answers, for both
drivers alike (as httpx's ``MockTransport`` for an HTTP client). Tests, the library's and its users', inject
refusals, throttling, conflicts and lost responses here, without reaching inside the library::

    class LoseTheFirstResponse(Interceptor):
        lost = False

        def response(self, call, response):
            if call.operation == "TransactWriteItems" and not self.lost:
                self.lost = True
                raise botocore.exceptions.ReadTimeoutError(endpoint_url="lost")
            return response

    with intercepting(LoseTheFirstResponse()):
        Like(...).save()        # applied once, reported once
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ._calls import Call

__all__ = ["Interceptor", "intercepting", "on_request", "on_response"]


class Interceptor:
    """Sees each request the library sends (counted writes, counts from the stream, the reads and writes of the
    write path and of parents' saves). Subclass it and override either method; both run on the thread or event
    loop that sends, and must not block."""

    def request(self, call: Call) -> Optional[Dict[str, Any]]:
        """Before ``call`` is sent: return ``None`` to send it, a response to answer it without sending, or raise
        a botocore ``ClientError`` or ``BotoCoreError`` to fail it unsent."""
        return None

    def response(self, call: Call, response: Dict[str, Any]) -> Dict[str, Any]:
        """After DynamoDB answered ``call`` with ``response`` (it was applied): return the response the library
        sees, or raise a botocore error to lose it (a read timeout: the library cannot know it was applied)."""
        return response


_installed: Tuple[Interceptor, ...] = ()
_lock = threading.Lock()


@contextmanager
def intercepting(*interceptors: Interceptor) -> Iterator[None]:
    """Install ``interceptors`` for every thread and event loop of the process while the block runs (the first
    given is asked first), then take them off again."""
    global _installed
    with _lock:
        _installed = _installed + interceptors
    try:
        yield
    finally:
        with _lock:
            remaining: List[Interceptor] = list(_installed)
            for interceptor in interceptors:
                remaining.remove(interceptor)
            _installed = tuple(remaining)


def on_request(call: Call) -> Optional[Dict[str, Any]]:
    """The response an installed interceptor answers ``call`` with unsent, or ``None`` to send it (an interceptor
    may raise)."""
    for interceptor in _installed:
        answered = interceptor.request(call)
        if answered is not None:
            return answered
    return None


def on_response(call: Call, response: Dict[str, Any]) -> Dict[str, Any]:
    """``response`` as the installed interceptors pass it on (one may raise)."""
    for interceptor in _installed:
        response = interceptor.response(call, response)
    return response
