"""
:class:`SignalCapture`: record the library's signals during a test.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List

from .. import signals

__all__ = ["SignalCapture"]

_NAMES = ("child_added", "child_removed", "duplicate_rejected", "missing_rejected", "counter_repaired")


class SignalCapture:
    """While active, every send of each pynamodb-counters signal is recorded, from any thread.

    ``capture.child_added`` (likewise ``child_removed``, ``duplicate_rejected``, ``missing_rejected``,
    ``counter_repaired``) is a list of the keyword arguments of each send, with the sender under ``"sender"``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: Dict[str, List[Dict[str, Any]]] = {name: [] for name in _NAMES}
        self._receivers = {name: self._receiver(name) for name in _NAMES}

    def _receiver(self, name: str) -> Any:
        def receive(sender: Any, **kwargs: Any) -> None:
            with self._lock:
                self.sent[name].append(dict(kwargs, sender=sender))
        return receive

    def __getattr__(self, name: str) -> List[Dict[str, Any]]:
        if name in _NAMES:
            return self.sent[name]
        raise AttributeError(name)

    def __enter__(self) -> SignalCapture:
        for name, receiver in self._receivers.items():
            getattr(signals, name).connect(receiver, weak=False)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, receiver in self._receivers.items():
            getattr(signals, name).disconnect(receiver)
