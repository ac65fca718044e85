"""
Reading raw DynamoDB items: a counter, a sequence, the shard items that hold a counter. Pure, no I/O.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Optional, Tuple, Union

from .._keys import ParentKey
from ..declare._attributes import CounterField
from ..exceptions import CorruptCounterError

__all__ = ["ShardItems", "StoredNumber", "count_of", "counter_shards", "stored_number", "whole_count"]

ShardItems = List[Optional[Dict[str, Any]]]
"""One parent's shard items as DynamoDB returned them, by shard index (``None`` where an item is absent)."""

StoredNumber = Union[int, Decimal]
"""A counter as DynamoDB holds it: an ``int``, or a :class:`~decimal.Decimal` for a number that is not whole."""


def count_of(item: Optional[Dict[str, Any]], attr_name: str) -> Optional[int]:
    """A number attribute of a raw item, or ``None`` when the item or the attribute is absent."""
    raw = ((item or {}).get(attr_name) or {}).get("N")
    return int(raw) if raw is not None else None


def stored_number(item: Optional[Dict[str, Any]], attr_name: str) -> Optional[StoredNumber]:
    """A counter of a raw item exactly as stored: an ``int``, a :class:`~decimal.Decimal` when it is not a whole
    number, ``None`` when the item or the attribute is absent."""
    raw = ((item or {}).get(attr_name) or {}).get("N")
    if raw is None:
        return None
    number = Decimal(raw)
    return int(number) if number == number.to_integral_value() else number


def whole_count(item: Optional[Dict[str, Any]], counter: CounterField, key: ParentKey) -> Optional[int]:
    """``counter`` in a raw item of the parent ``key`` (or one of its shard items), ``None`` when absent.

    :raises CorruptCounterError: the item holds a number that is not whole, naming the parent and the counter.
    """
    value = stored_number(item, counter.attr_name)
    if isinstance(value, Decimal):
        assert counter.model is not None
        raise CorruptCounterError.of(counter.model, key, str(counter.name), value)
    return value


def counter_shards(counter: CounterField, items: ShardItems) -> List[Tuple[int, Optional[Dict[str, Any]]]]:
    """The shard items (index, item) that hold or may receive ``counter``'s counts: the parent item, the counter's
    own shards (present or not), and any further shard item still holding a count of it (left by a reduced
    ``shards=`` not yet collapsed)."""
    return [(shard, item) for shard, item in enumerate(items)
            if shard < counter.shards or count_of(item, counter.attr_name) is not None]
