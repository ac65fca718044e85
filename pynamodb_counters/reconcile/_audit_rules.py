"""
What an audit counts, whichever way it reads (the live table, an export): the counter and the relations feeding
it, the feeders it recognises on a parent, the classes a relation counts under its prefix, the rollups past their
TTL that are not drift, and a counter's stored total over its shards. Declarations only, no I/O.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Optional, Sequence, Tuple

from pynamodb.attributes import TTLAttribute
from pynamodb.exceptions import AttributeDeserializationError

from .._keys import ParentKey, as_returned, key_attributes
from ..declare._attributes import CounterField
from ..declare._feeder_ids import feeder_id, legacy_feeder_id
from ..declare._relations import Relation
from ..declare._spec import check_feeder_ids, feeders_of
from ..exceptions import ChildValueError, ConfigurationError, InvalidArgumentError, ParentKeyError
from ..write._items import StoredNumber, count_of

__all__ = ["Uncountable", "audited", "counted_child", "expired", "expired_at", "loaded_feeders",
           "shares_partitions", "sum_stored", "ttl_name"]


class Uncountable(Exception):
    """The children of a parent cannot be counted exactly: the audit reports it unverifiable (with this message as
    its cause) and goes on with the other parents. Raised for a child PynamoDB cannot load, a child its relation
    cannot count (:class:`~pynamodb_counters.exceptions.ChildValueError`,
    :class:`~pynamodb_counters.exceptions.ParentKeyError`), and a ``prefix=`` relation whose children of one
    partition count into several parents."""


def audited(target: Any) -> Tuple[CounterField, Tuple[Relation, ...]]:
    """The counter an audit of ``target`` (a counter, or one relation feeding it) checks, and every relation
    feeding it.

    :raises InvalidArgumentError: ``target`` is neither.
    :raises ConfigurationError: no relation feeding the counter is loaded, or one can be audited neither by its
      prefix nor by a ``children=`` function.
    """
    counter = target.counter if isinstance(target, Relation) else target
    if not isinstance(counter, CounterField) or counter.model is None or counter.name is None:
        raise InvalidArgumentError(f"audit() needs a CounterField such as Post.like_tally or a relation such "
                                   f"as Like.post, not {target!r}")
    feeders = feeders_of(counter)
    if not feeders:
        raise ConfigurationError(f"no counted_by() relation feeds {counter.model.__name__}.{counter.name} among "
                                 f"the models loaded: import the modules that declare its relations (the "
                                 f"command's --import MODULE)")
    for relation in feeders:
        if relation.prefix is None and relation.children is None:
            raise ConfigurationError(f"{relation} cannot be audited: declare counted_by(..., prefix=...) for "
                                     f"children in the parent's partition, or children=... to count them")
        if relation.prefix is not None and not relation.child_model._range_keyname:
            raise ConfigurationError(f"{relation}: prefix= needs a child model with a range key")
    return counter, feeders


def loaded_feeders(counter: CounterField) -> Dict[str, Relation]:
    """The feeder ids an audit of ``counter`` recognises, each with the loaded relation it names: every loaded
    relation's :func:`~pynamodb_counters.declare._counted.feeder_id`, and its legacy ``module:Class.relation`` id
    (recorded by earlier releases).

    :raises ConfigurationError: two loaded relations feeding ``counter`` that count different items share an id
      (an audit could not tell their parents apart): one of them needs ``feeder=``.
    """
    check_feeder_ids(counter)
    current = {feeder_id(relation): relation for relation in feeders_of(counter)}
    legacy = {legacy_feeder_id(relation): relation for relation in feeders_of(counter)}
    return {**legacy, **current}


def expired(model: Any, item: Dict[str, Any]) -> bool:
    """Whether ``item`` is past the time its model's ``TTLAttribute`` holds: DynamoDB deletes such items within
    days. Only a rollup bucket (a parent created by its first count) that expired is outside drift: no write
    counts into it any more."""
    return expired_at(ttl_name(model), item)


def ttl_name(model: Any) -> Optional[str]:
    """The stored name of ``model``'s ``TTLAttribute``, ``None`` when it has none."""
    return next((attribute.attr_name for attribute in model.get_attributes().values()
                 if isinstance(attribute, TTLAttribute)), None)


def expired_at(name: Optional[str], item: Dict[str, Any]) -> bool:
    """Whether ``item`` is past the time its attribute ``name`` holds (:func:`expired`, from the attribute's stored
    name alone: a worker process reading an export is given that, not the model)."""
    if name is None:
        return False
    expires = count_of(item, name)
    return expires is not None and expires <= time.time()


def sum_stored(values: Sequence[Optional[StoredNumber]]) -> Optional[StoredNumber]:
    """The sum of the values present, ``None`` when none is (an ``int`` unless one is not whole)."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    total = sum(present)
    return total if isinstance(total, int) or total != total.to_integral_value() else int(total)


def shares_partitions(relation: Relation) -> bool:
    """Whether the parents ``relation`` counts into may share a partition (their model has a range key), so that
    its children under ``prefix=`` are read and checked to name the parent audited, not only counted."""
    return relation.prefix is not None and len(key_attributes(relation.parent_model)) > 1


def counted_child(relation: Relation, item: Dict[str, Any], parent: Optional[ParentKey]) -> int:
    """What the child ``item`` (raw, as a Query returns it) adds to its parent, loaded as PynamoDB loads it
    (defaults applied, NULL read as ``None``): ``amount=`` where ``when=`` holds, else ``0``.

    :param parent: the parent audited, where the relation's parents may share a partition: the child must name
      it (``key=``).
    :raises Uncountable: PynamoDB cannot load the item (an attribute stored with the wrong type), the relation's
      functions fail on it or return what it cannot count, or it names another parent than ``parent``.
    """
    model = relation.child_model
    try:
        child = model.from_raw_data(as_returned(item))
    except AttributeDeserializationError as error:
        raise Uncountable(f"{relation}: the {model.__name__} item {_item_key(model, item)} cannot be loaded by "
                          f"PynamoDB ({error}), so it cannot be counted; fix or delete it") from error
    try:
        if parent is not None and relation.parent_key(child) != parent:
            raise Uncountable(
                f"{relation}: prefix={relation.prefix} reads every child of the partition {parent[0]!r}, but key= "
                f"sends {model.__name__} {_item_key(model, item)} to {relation.parent_key(child)!r}, another "
                f"parent of that partition; declare counted_by(..., children=...) to count each parent's own")
        counted = relation.changes(child, 1)  # the counting rule a counted write counts it by
        return counted[0].delta if counted else 0
    except (ChildValueError, ParentKeyError) as error:
        raise Uncountable(str(error)) from error


def _item_key(model: Any, item: Dict[str, Any]) -> str:
    """The key of a raw item, as its values: ``('CART#a', 'LINE#2')``."""
    return repr(tuple(next(iter((item.get(attribute.attr_name) or {"NULL": True}).values()))
                      for attribute in key_attributes(model)))
