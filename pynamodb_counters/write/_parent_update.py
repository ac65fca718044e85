"""
A parent item's counter Update (:class:`ParentUpdate`): every change counted into the item in one transaction
gathered in one action (``ADD a :x, b :y``), its request, and the errors its refusals mean. No I/O; the one
state it writes is the shapes of request it has built, kept on the model's spec.

The Update is guarded as its parent must be: the parent exists and, in a polymorphic model, holds its class; a
decrement keeps the counter's floor of zero (lifted while a formerly sharded counter awaits its fold); an
increment of a limited counter stays within its limit. A rollup's first counts create it where absent instead
(with every counter, ``0`` included, and its defaults), never as another model's item; found gone, counted into
again, it must still be absent. A sharded counter's delta goes to a shard item, guarded by being one. Every
Update adds 1 to the counted-write sequence and records the relations that fed it (``_cfeed``). Each shape of it
is built once through PynamoDB and copied with the next key (:func:`parent_request`).
"""
from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Set, Tuple, Type

from pynamodb.expressions.condition import Condition

from .._compat import ItemId, serialized_key_request, version_condition
from ..declare._base import DECLARED, FED_BY, SEQUENCE, SHARD, SHARD_COUNT, SPEC_HELD, counted_classes
from ..declare._shards import foreign_shard_message, is_shard_item
from ..declare._spec import ModelSpec, foreign_feeds
from ..exceptions import (
    ConditionFailedError,
    CounterError,
    CounterUnderflowError,
    LimitExceededError,
    ParentKeyError,
    ParentNotFoundError,
)
from ._actions import CHECK_FAILED, Action, Cancellation, oversized_key
from ._conditions import created_parent_condition, parent_condition, within_limit
from ._items import stored_of
from ._writes import Write

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action as UpdateAction
    from pynamodb.models import Model

    from ..declare._relations import Relation

__all__ = ["SHAPES_HELD", "ParentUpdate", "parent_request", "stale_shapes"]

SHAPES_HELD = 256
"""How many shapes of counter Update are kept per parent model (:attr:`ModelSpec.requests`)."""


class ParentUpdate(Action):
    """A parent item's counter Update, gathering every change counted into it in one transaction.

    :ivar deltas: the change per counter (Python name).
    :ivar fed_by: the feeder entries of the relations that fed it.
    :ivar rollup: fed only by relations that create their parent.
    :ivar creates: fed only by their first counts: it creates the rollup where absent.
    :ivar defaults: a created rollup's ``parent_defaults``, from its first child.
    :ivar absent: a rollup found gone, counted into again: it must still be absent.
    :ivar merged: a caller's ``update()`` or ``condition_check()`` of the same item, merged into it.
    :ivar relation: the first relation counted into it (named when another model's relation names its item).
    :ivar spec: its model's spec, looked up once for the action (its request and its refusals read it).
    :raises ParentKeyError: the key is too long for DynamoDB.
    """

    verb = "Update"

    def __init__(self, model: Type[Model], key: Tuple[Any, ...], shard: int, where: ItemId,
                 relation: Relation, spec: ModelSpec) -> None:
        super().__init__(model, key, where)
        wrong = oversized_key(where[1:])
        if wrong is not None:
            raise ParentKeyError(f"{relation}: the key function gave a key of {relation.parent_model.__name__} that "
                                 f"DynamoDB cannot store: {wrong} ({str(key)[:80]}...). Nothing was written")
        self.spec = spec
        self.shard = shard
        self.deltas: Dict[str, int] = {}
        self.fed_by: Set[str] = set()
        self.rollup = True
        self.creates = True
        self.defaults: Optional[Dict[str, Any]] = None
        self.absent = False
        self.merged: Optional[Write] = None
        self.relation = relation

    def request(self, token: str) -> Dict[str, Any]:
        return parent_request(self)

    @property
    def creating(self) -> bool:
        """Whether it creates its item where absent: a rollup's first counts, adding nothing below zero."""
        return self.creates and not self.shard and all(delta >= 0 for delta in self.deltas.values())

    def failed(self, said: Cancellation) -> CounterError:
        item, model, where = said.item, self.model, self.label
        common = self.about(said)
        if self.shard and item and not is_shard_item(item):  # a shard's key holds another item
            return ConditionFailedError(foreign_shard_message(model, self.key, self.shard), said.error, **common)
        if not item and self.shard:
            return ParentNotFoundError(
                f"shard {self.shard} of parent {where} does not exist: either the parent does not, or it was stored "
                f"before its counter was sharded (create its shards with pynamodb_counters.resharding.reshard(), or "
                f"save the parent again); nothing was written", said.error, shard=self.shard, **common)
        if not item:
            return ParentNotFoundError(f"parent {where} does not exist; nothing was written", said.error, **common)
        if self.absent:
            return ConditionFailedError(f"rollup {where}, found gone, kept being created again while this write "
                                        f"counted into it; nothing was written", said.error, **common)
        foreign = foreign_feeds(model) if self.rollup else {}
        owners = sorted({str(foreign[entry]) for entry in (item.get(FED_BY.attr_name) or {}).get("SS", ())
                         if entry in foreign})
        if owners:
            return ParentNotFoundError(f"parent {where} is an item that {', '.join(owners)} counts into, not a "
                                       f"{model.__name__}: an item belongs to one model, and {model.__name__}'s "
                                       f"counters are never added to another's. Nothing was written", said.error,
                                       **common)
        attribute = self.spec.discriminator
        if attribute is not None:
            allowed = {attribute.get_discriminator(cls) for cls in attribute.get_registered_subclasses(model)}
            stored = (item.get(attribute.attr_name) or {}).get("S")
            if allowed and stored not in allowed:
                return ParentNotFoundError(f"parent {where} holds a {stored!r} item, not a {model.__name__}; "
                                           f"nothing was written", said.error, **common)
        attributes = model.get_attributes()
        for name, delta in self.deltas.items():
            count: Any = stored_of(item, attributes[name].attr_name)  # exact: a number that is not whole stays one
            if delta < 0 and (count is None or count < -delta):
                whole = "" if isinstance(count, int) or count is None else \
                    ", not a whole number (written outside the library?),"
                return CounterUnderflowError(
                    f"{model.__name__}.{name} of {self.key!r} holds {count}{whole} so removing {-delta} would take it "
                    f"below zero: the counter has drifted. Recount its children and repair it with set_counter(). "
                    f"Nothing was written", said.error, attribute=name, stored=count, **common)
            limit: Any = self.spec.counters[name].limit
            if delta > 0 and limit is not None:
                if not isinstance(limit, int):  # held by the parent, as stored
                    limit = stored_of(item, limit.attr_name)
                if limit is not None and (count or 0) + delta > limit:
                    return LimitExceededError(
                        f"{model.__name__} {self.key!r} is full: {name} holds {count or 0}, its limit is {limit}, so "
                        f"adding {delta} would pass it. Nothing was written", said.error,
                        attribute=name, limit=limit, stored=count or 0, **common)
        return ConditionFailedError(f"the condition on parent {where} was not met", said.error, **common)

    def returned(self, said: Cancellation) -> bool:
        """Whether the refusal found a rollup this write found gone stored again (created since by a first count)."""
        return self.absent and said.code == CHECK_FAILED and bool(said.item)


def parent_request(update: ParentUpdate) -> Dict[str, Any]:
    """``update``'s request. It depends only on the declarations and the update's shape (which deltas, which
    feeds, whether it creates its parent, its table, the subclasses of a single-table model and the relations
    declared so far), but for the key, a caller's merged update, a created parent's defaults and a gone rollup
    that must still be absent (those three are built afresh every time): each shape is built once through
    PynamoDB and then copied with the next key. The shapes are held on the model's spec, which
    is dropped, and them with it, when one of its counters is redeclared (its shards or its limit changed)."""
    spec = update.spec
    if update.merged is not None or (update.creates and update.defaults) or update.absent:
        return _built(update, spec)
    shape = _shape(update, spec)
    held = spec.requests
    found = held.get(shape)
    if found is None:
        request = _built(update, spec)
        if len(held) < SHAPES_HELD:  # sums bring a shape per amount: keep the first few hundred
            held[shape] = (dict(request), update)
        return request
    template = found[0]
    request = dict(template)
    (hash_name, hash_value), *ranged = template["Key"].items()
    key = {hash_name: {next(iter(hash_value)): update.where[1]}}
    for range_name, range_value in ranged:
        key[range_name] = {next(iter(range_value)): update.where[2]}
    request["Key"] = key
    return request


def stale_shapes() -> Iterator[Tuple[Type[Model], Dict[str, Any], Dict[str, Any]]]:
    """Every held shape, of every counted model, whose request differs from one built afresh for the update it
    was built for, while the declarations still give that update the same shape (each with the held request and
    the fresh one): the memo's one promise, for tests."""
    for model in counted_classes():
        spec: Optional[ModelSpec] = model.__dict__.get(SPEC_HELD)
        if spec is None:
            continue
        for shape, (template, update) in list(spec.requests.items()):
            if _shape(update, spec) == shape:
                fresh = _built(update, spec)
                if fresh != template:
                    yield model, template, fresh


def _shape(update: ParentUpdate, spec: ModelSpec) -> Any:
    """What ``update``'s request depends on besides its model's spec (which holds the shapes) and its key."""
    model = update.model
    discriminator = spec.discriminator  # its guard names the subclasses known: more may be declared
    return (model.Meta.table_name,  # PynamoDB follows a table name changed at run time
            bool(update.shard), tuple(update.deltas.items()), frozenset(update.fed_by), update.creates,
            update.rollup, None if discriminator is None else tuple(discriminator.get_registered_subclasses(model)),
            DECLARED[0])  # the relations declared so far: other models' feeds in the table (foreign_feeds)


def _built(update: ParentUpdate, spec: ModelSpec) -> Dict[str, Any]:
    model = update.model
    attributes = model.get_attributes()
    actions: List[UpdateAction] = [SEQUENCE.add(1)]
    creates = update.creating
    condition: Any = SHARD.exists() if update.shard else created_parent_condition(model) if creates \
        else parent_condition(model)
    if update.absent and creates:
        condition = spec.keys[0].does_not_exist()
    foreign = foreign_feeds(model) if update.rollup and not update.shard else {}
    if foreign:  # a rollup never counts into an item that another model's relations count into
        fed_elsewhere: Condition = reduce(operator.or_, (FED_BY.contains(entry) for entry in sorted(foreign)))
        condition = ~fed_elsewhere if condition is None else condition & ~fed_elsewhere
    if creates:
        actions.extend(_created_with(model, spec, update.defaults or {}))
    if update.fed_by:  # which relations fed each counter changed here: an audit that cannot see one refuses it
        actions.append(FED_BY.add(set(update.fed_by)))
    counters = spec.counters
    for name, delta in update.deltas.items():
        if delta or creates:  # a first count of 0 still creates the counter, as 0
            actions.insert(-1 - bool(update.fed_by), attributes[name].add(delta))
        if delta < 0 and counters[name].shards == 1:
            # the floor of zero, lifted while the parent records shards its model no longer declares: until
            # reshard() folds them in, the parent item holds only part of a formerly sharded counter
            condition &= (attributes[name] >= -delta) | (SHARD_COUNT > spec.shards)
        if delta > 0 and counters[name].limited:
            limit = within_limit(counters[name], delta)
            condition = limit if condition is None else condition & limit
    merged = update.merged
    if merged is not None:
        if merged.condition is not None:
            condition = merged.condition if condition is None else condition & merged.condition
        extra = list(merged.actions)
        if merged.instance is not None and merged.add_version_condition:
            version = version_condition(merged.instance, actions=extra)
            if version is not None:
                condition = version if condition is None else condition & version
        actions = extra + actions
    return serialized_key_request(model, update.where[1], update.where[2], condition=condition, actions=actions)


def _created_with(model: Type[Model], spec: ModelSpec, defaults: Dict[str, Any]) -> List[UpdateAction]:
    """The actions that give a parent created by its first count what it starts with, where absent: its
    discriminator (in a polymorphic model) and the relation's ``parent_defaults``."""
    attributes = model.get_attributes()
    actions: List[UpdateAction] = []
    discriminator = spec.discriminator
    if discriminator is not None:
        actions.append(discriminator.set(discriminator | model))
    for name, value in defaults.items():
        if value is not None:
            actions.append(attributes[name].set(attributes[name] | value))
    return actions
