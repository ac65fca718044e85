"""
:class:`Backend`: a DynamoDB for one test, with the tables of the given models created and dropped.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Set

from ..relations import counters_of, feeders_of, relations_of

__all__ = ["Backend", "ExistingTableError", "related_models"]

_DUMMY_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                      "AWS_DEFAULT_REGION": "us-east-1"}


class ExistingTableError(RuntimeError):
    """A table the backend would create already exists."""


def related_models(models: Iterable[type]) -> List[type]:
    """``models`` plus every model counted with them: the parents their relations count into and the children
    that feed their counters, transitively, in a stable order."""
    found: List[type] = []
    pending = list(models)
    while pending:
        model = pending.pop(0)
        if model in found:
            continue
        found.append(model)
        pending.extend(relation.parent_model for relation in relations_of(model))
        for counter in counters_of(model).values():
            pending.extend(relation.child_model for relation in feeders_of(counter))
    return found


class Backend:
    """Points models at a DynamoDB and gives them fresh tables; undoes both on exit.

    :param kind: ``"moto"`` (moto in-process), ``"served"`` (a moto server, ``endpoint_url`` given) or
      ``"endpoint"`` (any DynamoDB endpoint: the tables are created, then deleted).
    :param models: the models to point; every model counted with them is included.
    :param endpoint_url: the endpoint, for ``"served"`` and ``"endpoint"``.
    """

    def __init__(self, kind: str, models: Iterable[type], endpoint_url: Optional[str] = None) -> None:
        if kind not in ("moto", "served", "endpoint"):
            raise ValueError(f"unknown backend kind {kind!r}")
        if kind != "moto" and not endpoint_url:
            raise ValueError(f"a {kind} backend needs an endpoint URL")
        self.kind = kind
        self.endpoint_url = endpoint_url if kind != "moto" else None
        self.models = related_models(models)
        self._hosts: Dict[type, Any] = {}
        self._environment: Dict[str, Optional[str]] = {}
        self._mock: Any = None

    def __enter__(self) -> Backend:
        if self.kind != "endpoint":  # never send dummy credentials to a real endpoint
            for name, value in _DUMMY_ENVIRONMENT.items():
                self._environment[name] = os.environ.get(name)
                os.environ.setdefault(name, value)
        if self.kind == "moto":
            try:
                from moto import mock_aws
            except ImportError as error:  # pragma: no cover - depends on the installation
                raise RuntimeError('the moto backend needs moto: pip install "pynamodb-counters[moto]"') from error
            self._mock = mock_aws()
            self._mock.start()
        for model in self.models:
            meta: Any = model.Meta  # type: ignore[attr-defined]
            self._hosts[model] = meta.__dict__.get("host", getattr(meta, "host", None))
            meta.host = self.endpoint_url
            model._connection = None  # type: ignore[attr-defined]
        for model in self.table_models():
            if not model.exists():  # type: ignore[attr-defined]
                model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.kind == "endpoint":
                for model in self.table_models():
                    model.delete_table()  # type: ignore[attr-defined]
        finally:
            for model, host in self._hosts.items():
                model.Meta.host = host  # type: ignore[attr-defined]
                model._connection = None  # type: ignore[attr-defined]
            if self._mock is not None:
                self._mock.stop()
            for name, value in self._environment.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def table_models(self) -> List[type]:
        """One model per distinct table, to create or delete it."""
        seen: Set[str] = set()
        chosen = []
        for model in self.models:
            table = model.Meta.table_name  # type: ignore[attr-defined]
            if table not in seen:
                seen.add(table)
                chosen.append(model)
        return chosen
