"""
:func:`set_counter`: the explicit path to change a counter by hand, for repairs; and :func:`write_total`, the
write under it and under :func:`pynamodb_counters.repair` for a sharded counter.
"""
from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any, Dict, List, Optional

from pynamodb.exceptions import UpdateError

from .._keys import ParentKey, serialize_key
from ..declare._attributes import CounterField
from ..declare._counting_rule import normalize_key
from ..declare._stored_names import SEQUENCE, SHARD
from ..exceptions import ConditionFailedError, InvalidArgumentError, TransactionError
from ._conditions import parent_condition, sequence_unchanged, shard_request, shard_unchanged
from ._fetches import read_shards
from ._items import ShardItems, counter_shards, stored_number
from ._send import send

__all__ = ["set_counter", "write_total"]


def set_counter(counter: CounterField, key: Any, value: int, *, expected: Optional[int] = None) -> None:
    """Set one parent's counter to ``value``, in one conditional UpdateItem.

    Use it to repair drift found by an audit. With ``expected``, the write only happens if the counter still
    holds ``expected`` (a missing attribute counts as ``0``), so a child counted in the meantime is never
    overwritten: recount and try again.

    On a sharded counter, ``value`` is the total: one TransactWriteItems writes the parent item's share so that
    the shards add up to it (the share may be negative), conditioned on every shard's counted-write sequence as
    just read.

    :param counter: the counter, as a class attribute (``Post.like_tally``).
    :param key: the parent's key: a hash key value, or a ``(hash, range)`` tuple.
    :param value: the new count, at least ``0``.
    :param expected: the value the counter must still hold.
    :raises ConditionFailedError: the parent does not exist, or the counter no longer holds ``expected``;
      nothing was written.
    """
    if not isinstance(counter, CounterField) or counter.model is None or counter.name is None:
        raise InvalidArgumentError(f"set_counter() needs a CounterField such as Post.like_tally, not {counter!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"a counter holds an int of at least 0, not {value!r}")
    model = counter.model
    key = normalize_key(model, key, f"set_counter({counter!r})")
    if counter.shards > 1:
        items = read_shards(model, [key], counter.shards, consistent_read=True)[key]
        total = sum(stored_number(item, counter.attr_name) or 0 for item in items)
        if not items[0] or (expected is not None and total != expected) or \
                not write_total(counter, key, items, value):
            raise ConditionFailedError(
                f"{model.__name__} {key!r} does not exist" + (
                    f", or its {counter.name} no longer holds {expected}" if expected is not None else
                    ", or a counted write moved one of its shards meanwhile") + "; nothing was written",
                model=model, key=key)
        return
    hash_key, range_key = serialize_key(model, key)
    condition = parent_condition(model)
    if expected is not None:
        holds = counter == expected
        condition &= (holds | counter.does_not_exist()) if expected == 0 else holds
    try:
        model._get_connection().update_item(hash_key, range_key=range_key,
                                            actions=[counter.set(value), SEQUENCE.add(1)], condition=condition)
    except UpdateError as error:
        if error.cause_response_code == "ConditionalCheckFailedException":
            raise ConditionFailedError(
                f"{model.__name__} {key!r} does not exist" + (
                    f", or its {counter.name} no longer holds {expected}" if expected is not None else "")
                + "; nothing was written", error, model=model, key=key) from error
        raise TransactionError(f"DynamoDB rejected set_counter(): {error}", error) from error


def write_total(counter: CounterField, key: ParentKey, items: ShardItems, value: int) -> bool:
    """Make a sharded counter's total ``value``: one TransactWriteItems that sets the parent item's share to
    ``value`` minus the other shards' counts as read in ``items``, conditioned on the counted-write sequence of
    every shard item that holds or may receive the counter's counts (and on absent shards staying absent). A
    shard holding a number that is not whole is set to ``0`` in the same transaction.

    :returns: ``False`` when one of them moved since ``items`` were read; nothing was written.
    """
    assert counter.model is not None
    return send(counter.model, total_requests(counter, key, items, value), str(uuid.uuid4())).response is not None


def total_requests(counter: CounterField, key: ParentKey, items: ShardItems, value: int) -> List[Dict[str, Any]]:
    """The transaction that makes a sharded counter's total ``value``: the parent item's share set to ``value``
    minus the other shards' counts as read in ``items``, conditioned on the counted-write sequence of every shard
    item that holds or may receive the counter's counts (and on absent shards staying absent). A shard holding a
    number that is not whole is set to ``0`` in the same transaction."""
    model = counter.model
    assert model is not None
    requests: List[Dict[str, Any]] = []
    others = 0
    for shard, item in counter_shards(counter, items)[1:]:
        count = stored_number(item, counter.attr_name)
        condition = SHARD.does_not_exist() if item is None else shard_unchanged(item)
        if isinstance(count, Decimal):  # not a whole number (written by hand): this shard starts again at 0
            requests.append({"Update": shard_request(model, key, shard, condition=condition,
                                                     actions=[counter.set(0), SEQUENCE.add(1)])})
            continue
        others += count or 0
        requests.append({"ConditionCheck": shard_request(model, key, shard, condition=condition)})
    condition = parent_condition(model) & sequence_unchanged(items[0])
    requests.append({"Update": shard_request(model, key, 0, condition=condition,
                                             actions=[counter.set(value - others), SEQUENCE.add(1)])})
    return requests
