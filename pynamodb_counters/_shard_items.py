"""
Bringing a parent's shard items in line with its counters: read them, write the one transaction that reshapes
them (``reshape_requests``), and read again if a live write moved one meanwhile.

The I/O under :func:`pynamodb_counters.reshard`, a parent's first ``save()`` and the commit pipeline's recovery of
a parent stored before its counter was sharded.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterable, Type

from ._compat import ParentKey
from ._connection import send
from ._reads import parent_keys, read_shards
from ._requests import reshape_requests
from ._retries import DEFAULT_RETRY_POLICY
from ._shards import foreign_shard, foreign_shard_message
from ._spec import counters_of
from .exceptions import ConditionFailedError, TransactionError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["create_shards", "reshape"]


def create_shards(model: Type[Model], parents: Iterable[Any], *, max_attempts: int = 5,
                  saved: bool = False) -> int:
    """Bring each parent's shard items in line with ``model``'s declared counters: create the missing ones (and
    fold any a smaller ``shards=`` no longer uses into the parent). A parent's ``save()`` calls it the first time;
    it is idempotent.

    :param saved: the parent's ``save()`` has just written the parent item (a refusal says so).
    :returns: how many parents were rewritten.
    :raises ConditionFailedError: a shard's key holds another item (not a shard item); none of that parent's
      shard items was written.
    """
    keys = parent_keys(model, parents, f"create_shards({model.__name__}, parents=...)")
    return sum(reshape(model, key, {}, max_attempts, saved) for key in keys)


def reshape(model: Type[Model], key: ParentKey, targets: Dict[str, int], max_attempts: int,
            saved: bool = False) -> bool:
    """One parent: read its shard items, write the one transaction that gives each counter its ``targets``
    number of shards (its declared number where ``targets`` names none); again if it moved.

    :param saved: the parent's ``save()`` has just written the parent item (a refusal says so).
    :returns: whether anything was written.
    :raises DoesNotExist: the model's own, for a parent that does not exist.
    :raises ConditionFailedError: a shard's key holds another item (not a shard item); nothing was written.
    :raises TransactionError: the parent kept changing through ``max_attempts`` attempts.
    """
    counters = counters_of(model)
    wanted = {name: targets.get(name, counter.shards) for name, counter in counters.items()}
    layout = max(wanted.values(), default=1)
    for attempt in range(1, max_attempts + 1):
        if attempt > 1:
            DEFAULT_RETRY_POLICY.sleep(DEFAULT_RETRY_POLICY.delay(attempt - 1))
        items = read_shards(model, [key], layout, consistent_read=True)[key]
        if not items[0]:
            raise model.DoesNotExist(f"{model.__name__} {key!r} does not exist; nothing was written")
        requests = reshape_requests(model, key, items, counters, wanted, layout)
        if not requests:
            return False
        sent = send(model, requests, str(uuid.uuid4()))
        if sent.response is not None:
            return True
        reasons = sent.cancellation_reasons or []
        shard = foreign_shard(model, key, [reason.get("Item") for reason in reasons])
        if shard is not None:  # another item holds a shard's key: refused for good, nothing was written
            raise ConditionFailedError(foreign_shard_message(model, key, shard, saved=saved), sent.error,
                                       model=model, key=key, cancellation_reasons=reasons)
        # a straggling write moved a shard being folded since it was read (or the parent is gone): read again
    raise TransactionError(f"{model.__name__} {key!r} kept changing through {max_attempts} attempts to reshard it; "
                           f"nothing was written, run it again")
