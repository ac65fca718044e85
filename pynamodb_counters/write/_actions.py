"""
The actions of a TransactWriteItems, one small class each: a counted child's own (:class:`ChildPut`,
:class:`ChildEdit` and :class:`ChildDelete`), a parent's counter Update (:class:`ParentUpdate`), a sharded
parent's shard items, the check that a rollup found gone is still absent and the caller's writes that count
nothing; a child deleted by TTL, its stream record's marker, sits beside them (``_expiries``). Pure, no I/O.

Each action knows its item, builds its request (:meth:`Action.request`) and reads DynamoDB's cancellation reason
for it into the error it means (:meth:`Action.refusal`): the planner puts them together, the commit sends them
and hands each refusal back to the action it concerns.

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

A new child's Put is built so too, once per model and table through PynamoDB, and then made with the next
child's own serialized item (:func:`put_request`), unless a caller's condition or a version set puts values in
its condition.

Besides a counted child's and its parents' Updates: a sharded parent's :class:`ShardItem`, the
:class:`RollupCheck` that a rollup found gone is still absent, and the caller's own writes that count nothing
(:class:`Passthrough`).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import reduce
from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Any,
    ClassVar,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
)

from pynamodb.constants import ALL_OLD, KEY
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from .._keys import ItemId, item_id, key_request, version_condition
from ..declare._counted import SPEC_HELD, CountedBase, counted_classes
from ..declare._shards import (
    foreign_shard_message,
    is_shard_item,
    not_a_shard,
    shard_item_message,
    shard_key,
    shard_or_absent,
)
from ..declare._spec import ModelSpec, foreign_feeders, shard_count, spec_of
from ..declare._stored_names import EDIT_ID, EDITED_BY, FEEDERS, SEQUENCE, SHARD, SHARD_COUNT, WRITE_ID
from ..exceptions import (
    ConditionFailedError,
    CounterError,
    CounterUnderflowError,
    DuplicateChildError,
    InvalidArgumentError,
    LimitExceededError,
    MissingChildError,
    ParentKeyError,
    ParentNotFoundError,
    TransactionError,
)
from ._conditions import created_parent_condition, parent_condition, pending_fold, pending_fold_message, within_limit
from ._deltas import Decision, Deltas
from ._items import count_of, stored_number
from ._skipping import counting_skipped
from ._stored import Stored, deciding_attributes, read_by
from ._writes import Write, WriteKind, parent_save_actions

if TYPE_CHECKING:  # pragma: no cover
    import botocore.exceptions
    from pynamodb.expressions.update import Action as UpdateAction
    from pynamodb.models import Model

    from ..declare._spec import RelationSpec

__all__ = ["Action", "CHECK_FAILED", "Cancellation", "ChildAction", "ChildDelete", "ChildEdit", "ChildPut",
           "ParentUpdate", "Passthrough", "RollupCheck", "SHAPES_HELD", "ShardItem", "StreamMark", "is_put_shape",
           "item_of",
           "keyed_request", "parent_request", "pending_fold_refusal", "put_request", "pynamodb_view", "shard_items",
           "stale_shapes"]

KEY_LIMITS = ((2048, "partition (hash) key"), (1024, "sort (range) key"))
"""DynamoDB's limits on a key's values, in bytes, with their names."""

CHECK_FAILED = "ConditionalCheckFailed"
"""The cancellation reason code of an action whose condition failed."""


@dataclass(frozen=True)
class Cancellation:
    """What DynamoDB said of one action of a cancelled transaction.

    :ivar code: its reason's code (``"ConditionalCheckFailed"``...).
    :ivar item: the item it returned (``ALL_OLD``), raw, or ``None``.
    :ivar reasons: every action's reason, as DynamoDB returned them (every error carries them).
    :ivar error: the botocore error of the cancellation.
    """

    code: Optional[str]
    item: Optional[Dict[str, Any]]
    reasons: Sequence[Dict[str, Any]]
    error: Optional[botocore.exceptions.ClientError]
    message: str = ""


class Action:
    """One action of a TransactWriteItems, on one item.

    :ivar model: the item's model.
    :ivar key: the item's key (a shard item's: its parent's, see :attr:`shard`).
    :ivar where: the item's identity in the transaction (table, serialized key).
    """

    verb: ClassVar[str] = ""
    shard: int = 0

    def __init__(self, model: Type[Model], key: Tuple[Any, ...], where: Optional[ItemId] = None) -> None:
        self.model = model
        self.key = key
        self.where = where if where is not None else item_id(model, key)

    @property
    def label(self) -> str:
        """The item, as errors name it."""
        return f"{self.model.__name__} {self.key!r}"

    def request(self, token: str) -> Dict[str, Any]:
        """The action's request, for a transaction sent with ``token``."""
        raise NotImplementedError

    def error_of(self, said: Cancellation) -> CounterError:
        """The error DynamoDB's refusal of this action means."""
        if said.code != CHECK_FAILED:
            return TransactionError(f"DynamoDB cancelled the transaction: {said.code} on {self.label}: "
                                    f"{said.message}", said.error)
        return self.condition_error(said)

    def condition_error(self, said: Cancellation) -> CounterError:
        """The error of this action's failed condition."""
        return ConditionFailedError(f"the condition on {self.label} was not met", said.error, **self.about(said))

    def own(self, said: Cancellation, token: str) -> bool:
        """Whether the refusal shows this very write committed (on an attempt whose response was lost)."""
        return False

    def about(self, said: Cancellation) -> Dict[str, Any]:
        """What every error of this action carries: the item at fault and the reasons."""
        return dict(model=self.model, key=self.key, cancellation_reasons=said.reasons)


def oversized_key(serialized: Tuple[Any, Optional[Any]]) -> Optional[str]:
    """What is wrong with a serialized key that DynamoDB would refuse as too long, or ``None``: what an action
    checks of its item when it is made."""
    for value, (limit, name) in zip(serialized, KEY_LIMITS):
        if value is None or len(value) <= limit // 4:  # at most 4 bytes a character: short enough
            continue
        size = len(value.encode("utf-8")) if isinstance(value, str) else len(value)
        if size > limit:
            return f"its {name} is {size} bytes; DynamoDB allows {limit} bytes"
    return None


def item_of(model: Type[Model], spec: ModelSpec, key: Tuple[Any, ...]) -> ItemId:
    """The identity of the item ``key`` of ``model`` within a transaction (``_keys.item_id``): a string key of a
    model whose key attributes are plain strings (``spec``, its spec, says) is its own serialized value."""
    if spec.string_keys:
        hash_key = key[0]
        range_key = key[1] if len(key) > 1 else None
        if type(hash_key) is str and hash_key and (range_key is None or type(range_key) is str and range_key):
            return model.Meta.table_name, hash_key, range_key
    return item_id(model, key)


def keyed_request(model: Type[Model], where: ItemId, **kwargs: Any) -> Dict[str, Any]:
    """A transaction action's request on the item ``where`` (its identity: the key serialized) of ``model``, built
    by its PynamoDB connection; a refusal returns the item (``ALL_OLD``)."""
    request: Dict[str, Any] = model._get_connection().get_operation_kwargs(
        where[1], range_key=where[2], key=KEY, return_values_on_condition_failure=ALL_OLD, **kwargs)
    return request


def saved_version(instance: Model, actions: List[UpdateAction]) -> Optional[Condition]:
    """What PynamoDB's ``save()`` does with a ``VersionAttribute``, as Update actions: append setting the version
    to the instance's plus one (``1`` when it has none) to ``actions``, and return the condition that the stored
    version is the instance's (``None`` without a ``VersionAttribute``)."""
    name = type(instance)._version_attribute_name
    if not name:
        return None
    attribute = type(instance).get_attributes()[name]
    value = getattr(instance, name)
    actions.append(attribute.set(value + 1 if value else 1))
    condition: Condition = attribute == value if value else attribute.does_not_exist()
    return condition


def pynamodb_view(instance: Model) -> Any:
    """``instance`` as PynamoDB sees it, past :class:`~pynamodb_counters.CounterMixin`: the mixin refuses its
    request helpers to other callers (PynamoDB's ``TransactWrite``), which would bypass counting."""
    return super(CountedBase, instance) if isinstance(instance, CountedBase) else instance


def pending_fold_refusal(action: Action, said: Cancellation) -> Optional[CounterError]:
    """A delete refused because the parent still records more shards than its model declares, or ``None``."""
    recorded = count_of(said.item, SHARD_COUNT.attr_name) or 1
    if recorded > shard_count(action.model):
        return ConditionFailedError(pending_fold_message(action.label, recorded, shard_count(action.model)),
                                    said.error, **action.about(said))
    return None


# -- a counted child's own action ------------------------------------------------------------------------------
class ChildAction(Action):
    """A counted child's own Put, Update or Delete.

    :ivar index: the position of its write in the transaction.
    :ivar write: the caller's write.
    :ivar decision: what its write was decided as in this attempt (the stored child it counts from, and more).
    :ivar counted: its counter changes in this attempt.
    :raises InvalidArgumentError: the child's own key is too long for DynamoDB.
    """

    relearns: ClassVar[bool] = True
    """Whether a refusal that returns the stored item teaches what the write is counted from (not for an expiry:
    it is counted from the stream's image, and its refusal returns its marker)."""

    def __init__(self, index: int, write: Write, decision: Decision, where: Optional[ItemId] = None) -> None:
        super().__init__(write.model, write.key, where)
        wrong = oversized_key(self.where[1:])
        if wrong is not None:
            raise InvalidArgumentError(f"{write.model.__name__} {str(write.key)[:80]}... cannot be stored by "
                                       f"DynamoDB: {wrong}. Nothing was written")
        self.index = index
        self.write = write
        self.decision = decision
        self.counted: Deltas = decision.deltas
        assert write.instance is not None
        self.instance: Model = write.instance

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """What the child is stored as once the action commits (``None``: deleted)."""
        return self.instance.serialize(null_check=False)

    def condition(self, basis: Stored) -> Condition:
        """An edit's, update's or delete's condition: the child is stored, and the attributes that decided its
        deltas (as its relations' functions read them while they were decided: ``Decision.decided_by``) hold what
        ``basis`` holds, the stored child they were counted from; then the caller's condition."""
        stored: Condition = self.write.spec.keys[0].exists()
        decided_by = self.decision.decided_by
        if decided_by is None:  # a plan made without deciding: what would decide them now
            states = [basis.view, self.instance] + ([self.decision.after.view] if self.decision.after else [])
            decided_by = deciding_attributes(self.model, read_by(self.write.spec.counting, states))
        same = basis.unchanged(decided_by)
        if same is not None:
            stored &= same
        given = self.write.condition
        return stored if given is None else stored & given


class ChildPut(ChildAction):
    """A new child's Put: create-only (``attribute_not_exists``), carrying the write id (``_cwid``) that
    recognises its own commit, and the shard count when its shard items are created with it: PynamoDB's Put
    (:func:`put_request`) with those two attributes added."""

    verb = "Put"

    def request(self, token: str) -> Dict[str, Any]:
        request = put_request(self.instance, self.write.spec, self.write.condition)
        shards = self.write.spec.shards
        if self.write.with_shards and shards > 1:  # created in this same transaction
            request["Item"][SHARD_COUNT.attr_name] = {"N": str(shards)}
        request["Item"][WRITE_ID] = {"S": token}
        return request

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        item: Dict[str, Any] = request["Item"]
        return item

    def own(self, said: Cancellation, token: str) -> bool:
        return said.code == CHECK_FAILED and (said.item or {}).get(WRITE_ID) == {"S": token}

    def condition_error(self, said: Cancellation) -> CounterError:
        if said.item:
            return DuplicateChildError(f"{self.label} already exists; it was not counted again", said.error,
                                       raw_item=said.item, item=_load(self.model, said.item), **self.about(said))
        return ConditionFailedError(f"the condition on saving {self.label} was not met", said.error,
                                    **self.about(said))


class ChildEdit(ChildAction):
    """A stored child's Update: an edit saved again (every attribute as the instance holds it, its own counters
    and the library's attributes kept as stored) or a counted ``update()`` (the caller's actions), conditioned on
    the stored child its deltas were counted from, carrying the edit id (``_ceid``)."""

    verb = "Update"

    def request(self, token: str) -> Dict[str, Any]:
        basis = self.decision.basis
        assert basis is not None
        if self.write.kind is WriteKind.UPDATE:
            assert self.decision.after is not None
            request: Dict[str, Any] = pynamodb_view(self.instance).get_update_kwargs_from_instance(
                [*self.write.actions, EDITED_BY.set(token)], condition=self.condition(basis),
                return_values_on_condition_failure=ALL_OLD, add_version_condition=self.write.add_version_condition)
            return request
        condition = self.condition(basis)
        actions = [*parent_save_actions(self.instance, self.write.spec), EDITED_BY.set(token)]
        version = saved_version(self.instance, actions)  # as save() writes it: the local version plus one
        if version is not None and self.write.add_version_condition:
            condition &= version
        return keyed_request(self.model, self.where, condition=condition, actions=actions)

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if self.decision.after is not None:  # an update: its stored result, NULLs and all
            return self.decision.after.item
        return super().stored_after(request)

    def own(self, said: Cancellation, token: str) -> bool:
        return said.code == CHECK_FAILED and (said.item or {}).get(EDIT_ID) == {"S": token}

    def condition_error(self, said: Cancellation) -> CounterError:
        if said.item:
            verb = "updating" if self.write.kind is WriteKind.UPDATE else "saving"
            return ConditionFailedError(f"the condition on {verb} {self.label} was not met", said.error,
                                        **self.about(said))
        return ConditionFailedError(f"{self.label} was deleted since it was loaded, and kept changing; nothing was "
                                    f"written", said.error, **self.about(said))


class ChildDelete(ChildAction):
    """A counted child's Delete, conditioned on the stored child its deltas were counted from (and, for a child
    that is itself a sharded parent, on recording no more shards than its model declares)."""

    verb = "Delete"

    def request(self, token: str) -> Dict[str, Any]:
        basis = self.decision.basis
        assert basis is not None
        condition = self.condition(basis)
        if self.write.with_shards and self.write.spec.counters:  # only the shard items it deletes with it
            condition &= pending_fold(self.model) & not_a_shard()
        request: Dict[str, Any] = pynamodb_view(self.instance).get_delete_kwargs_from_instance(
            condition=condition, return_values_on_condition_failure=ALL_OLD,
            add_version_condition=self.write.add_version_condition)
        return request

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return None

    def condition_error(self, said: Cancellation) -> CounterError:
        if said.item:
            return pending_fold_refusal(self, said) or ConditionFailedError(
                f"the condition on deleting {self.label} was not met", said.error, **self.about(said))
        return MissingChildError(f"{self.label} does not exist; no counter was decremented", said.error,
                                 **self.about(said))


class _PutShape:
    """A new child's Put as PynamoDB built it once for its model and table, but for its item (held in
    :attr:`ModelSpec.requests` under ``(_PutShape, model, table name)``): what the next child's item is made
    with, as ``Model._get_save_args`` and ``Connection.get_operation_kwargs`` make it.

    :ivar rest: the request but for its item (table, condition, its names, ``ALL_OLD``).
    :ivar keys: the model's key attributes' names and types, then the table's names and types for them.
    :ivar version: the version attribute's name and its first value serialized, or ``None``.
    :ivar built_for: the child it was built for (:func:`stale_shapes` builds it again).
    """

    __slots__ = ("rest", "keys", "version", "built_for")

    def __init__(self, request: Dict[str, Any], model: Type[Model], instance: Model) -> None:
        self.rest = {**request, "Item": None}  # the item in its place: the same request, in the same order
        table = model._get_connection().get_meta_table()
        hash_key, range_key = model._hash_key_attribute(), model._range_key_attribute()  # type: ignore[no-untyped-call]
        self.keys = ((hash_key.attr_name, hash_key.attr_type, table.hash_keyname,
                      table.get_attribute_type(table.hash_keyname)),
                     None if range_key is None else (range_key.attr_name, range_key.attr_type, table.range_keyname,
                      None if table.range_keyname is None else table.get_attribute_type(table.range_keyname)))
        version = model._version_attribute_name
        self.version = None if version is None else (
            model.get_attributes()[version].attr_name, request["Item"][model.get_attributes()[version].attr_name])
        self.built_for = instance

    def request(self, instance: Model) -> Dict[str, Any]:
        values: Dict[str, Any] = instance.serialize(null_check=True)
        (hash_name, hash_type, table_hash, table_hash_type), ranged = self.keys
        item: Dict[str, Any] = {table_hash: {table_hash_type: values.pop(hash_name, {}).get(hash_type)}}
        if ranged is not None:
            range_name, range_type, table_range, table_range_type = ranged
            range_value = values.pop(range_name, {}).get(range_type)
            if range_value is not None and table_range is not None:
                item[table_range] = {table_range_type: range_value}
        if self.version is not None:  # the first version, as save() writes a child whose version is unset
            name, first = self.version
            values[name] = dict(first)
        item.update(values)
        request = dict(self.rest)
        request["Item"] = item
        return request


def put_request(instance: Model, spec: ModelSpec, given: Optional[Condition]) -> Dict[str, Any]:
    """``instance``'s create-only Put (``attribute_not_exists`` on its hash key, ``given`` and, in a versioned
    model, its version's guard; ``ALL_OLD``): the request PynamoDB's ``get_save_kwargs_from_instance`` builds. It
    depends on the model, its table and the condition; with no caller's condition and no version set (whose
    values the condition carries), the first is built through PynamoDB and the next made from it with the child's
    own serialized item (PynamoDB's ``serialize``: nulls refused, defaults and maps as it writes them)."""
    shape = _put_shape(instance, given)
    if shape is not None:
        found = spec.requests.get(shape)
        if found is not None:
            made: Dict[str, Any] = found.request(instance)
            return made
    request = _put_built(instance, spec, given)
    if shape is not None and len(spec.requests) < SHAPES_HELD and _pynamodbs_own(type(instance)):
        spec.requests[shape] = _PutShape(request, type(instance), instance)
    return request


def _put_shape(instance: Model, given: Optional[Condition]) -> Optional[Tuple[Any, ...]]:
    """What ``instance``'s Put depends on but its item, or ``None`` where its condition carries values (a
    caller's condition, a version set)."""
    model = type(instance)
    version = model._version_attribute_name
    if given is not None or (version is not None and getattr(instance, version) is not None):
        return None
    return _PutShape, model, model.Meta.table_name  # PynamoDB follows a table name changed at run time


def _put_built(instance: Model, spec: ModelSpec, given: Optional[Condition]) -> Dict[str, Any]:
    absent: Condition = spec.keys[0].does_not_exist()
    request: Dict[str, Any] = pynamodb_view(instance).get_save_kwargs_from_instance(
        condition=absent if given is None else absent & given, return_values_on_condition_failure=ALL_OLD)
    return request


def _pynamodbs_own(model: Type[Model]) -> bool:
    """Whether ``model`` builds its Put with PynamoDB's own steps, which a held shape stands for (a model or a
    connection that overrides one is built by PynamoDB every time)."""
    from pynamodb.connection.base import Connection
    from pynamodb.connection.table import TableConnection
    from pynamodb.models import Model

    view: Any = super(CountedBase, model) if issubclass(model, CountedBase) else model
    connection = model._get_connection()
    return (view.get_save_kwargs_from_instance is Model.get_save_kwargs_from_instance
            and model._get_save_args is Model._get_save_args
            and model._handle_version_attribute is Model._handle_version_attribute
            and type(connection).get_operation_kwargs is TableConnection.get_operation_kwargs
            and type(connection.connection).get_operation_kwargs is Connection.get_operation_kwargs
            and type(connection.connection).get_identifier_map is Connection.get_identifier_map
            and type(connection.connection).get_item_attribute_map is Connection.get_item_attribute_map)


def is_put_shape(shape: Any) -> bool:
    """Whether a key of :attr:`ModelSpec.requests` holds a new child's Put (:func:`put_request`)."""
    return isinstance(shape, tuple) and bool(shape) and shape[0] is _PutShape


def _load(model: Type[Model], item: Dict[str, Any]) -> Any:
    try:
        return model.from_raw_data(item)
    except Exception:  # the raw item is still reported
        return None


SHAPES_HELD = 256
"""How many shapes of counter Update are kept per parent model (:attr:`ModelSpec.requests`)."""


@dataclass(frozen=True)
class StreamMark:
    """The mark on a parent item (or shard item) of the stream records one relation counted into it, from one
    partition of its child table (``_cstream:<feeder entry>``): the sequence number of the last one, zero-padded to
    40 digits. Records of one partition key reach the stream in order, so the mark says which of them were counted.

    :ivar name: the attribute's name.
    :ivar first: the first record this update counts.
    :ivar last: the last one.
    :ivar stored: the mark found stored (an update sent again counts the records after it), or ``None``: the
      update counts its records where no mark is stored, or one before :attr:`first`.
    """

    name: str
    first: str
    last: str
    stored: Optional[str] = None

    @property
    def path(self) -> Path:
        return Path([self.name])

    def unseen(self) -> Condition:
        """The condition that none of the records was counted before."""
        if self.stored is not None:
            stored: Condition = self.path == self.stored
            return stored
        unseen: Condition = self.path.does_not_exist() | (self.path < self.first)
        return unseen


class ParentUpdate(Action):
    """A parent item's counter Update, gathering every change counted into it in one transaction: made once, with
    every change merged (the plan gathers them first), and never changed after.

    :ivar deltas: the change per counter (Python name).
    :ivar feeders: the feeder entries of the relations that fed it.
    :ivar rollup: fed only by relations that create their parent.
    :ivar creates: fed only by their first counts: it creates the rollup where absent.
    :ivar defaults: a created rollup's ``parent_defaults``, from its first child.
    :ivar absent: a rollup found gone, counted into again: it must still be absent.
    :ivar merged: a caller's ``update()`` or ``condition_check()`` of the same item, merged into it.
    :ivar relation: the first relation counted into it (named when another model's relation names its item).
    :ivar spec: its model's spec, looked up once for the action (its request and its refusals read it).
    :ivar marks: from the stream (``streams``), the mark of the stream records each relation counts into it: set
      to the last one's sequence, on the condition that none of them was counted before.
    :raises ParentKeyError: the key is too long for DynamoDB.
    """

    verb = "Update"

    def __init__(self, model: Type[Model], key: Tuple[Any, ...], shard: int, where: ItemId,
                 relation: RelationSpec, spec: ModelSpec, deltas: Dict[str, int], feeders: AbstractSet[str], *,
                 rollup: bool, creates: bool, defaults: Optional[Dict[str, Any]] = None, absent: bool = False,
                 merged: Optional[Write] = None, marks: Tuple[StreamMark, ...] = ()) -> None:
        super().__init__(model, key, where)
        wrong = oversized_key(where[1:])
        if wrong is not None:
            raise ParentKeyError(f"{relation}: the key function gave a key of {relation.parent_model.__name__} that "
                                 f"DynamoDB cannot store: {wrong} ({str(key)[:80]}...). Nothing was written")
        self.spec = spec
        self.shard = shard
        self.deltas = dict(deltas)
        self.feeders = frozenset(feeders)
        self.rollup = rollup
        self.creates = creates
        self.defaults = defaults
        self.absent = absent
        self.merged = merged
        self.relation = relation
        self.marks = marks

    def request(self, token: str) -> Dict[str, Any]:
        return parent_request(self)

    @property
    def creating(self) -> bool:
        """Whether it creates its item where absent: a rollup's first counts, adding nothing below zero."""
        return self.creates and not self.shard and all(delta >= 0 for delta in self.deltas.values())

    def condition_error(self, said: Cancellation) -> CounterError:
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
        foreign = foreign_feeders(model) if self.rollup else {}
        owners = sorted({str(foreign[entry]) for entry in (item.get(FEEDERS.attr_name) or {}).get("SS", ())
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
            count: Any = stored_number(item, attributes[name].attr_name)  # exact: a number that is not whole stays one
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
                    limit = stored_number(item, limit.attr_name)
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
    feeds, whether it creates its parent, its table, the subclasses of a single-table model), but for the key, a
    caller's merged update, a created parent's defaults and a gone rollup that must still be absent (those three
    are built afresh every time): each shape is built once through PynamoDB and then copied with the next key.
    The shapes are held on the model's spec, which is dropped, and them with it, when a relation is declared
    (another model's feeds in the table may change) or one of its counters is redeclared (its shards or its
    limit changed)."""
    spec = update.spec
    if update.merged is not None or (update.creates and update.defaults) or update.absent or update.marks:
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
        for shape, held in list(spec.requests.items()):
            if isinstance(held, _PutShape):  # a child's Put: made from its shape, and built by PynamoDB
                instance = held.built_for
                if _put_shape(instance, None) == shape:  # still of that shape (saved, its version is set)
                    made, fresh = held.request(instance), _put_built(instance, spec, None)
                    if list(made.items()) != list(fresh.items()) or list(made["Item"].items()) != \
                            list(fresh["Item"].items()):
                        yield model, made, fresh
                continue
            template, update = held
            if _shape(update, spec) == shape:
                fresh = _built(update, spec)
                if fresh != template:
                    yield model, template, fresh


def _shape(update: ParentUpdate, spec: ModelSpec) -> Any:
    """What ``update``'s request depends on besides its model's spec (which holds the shapes) and its key."""
    model = update.model
    discriminator = spec.discriminator  # its guard names the subclasses known: more may be declared
    return (model.Meta.table_name,  # PynamoDB follows a table name changed at run time
            bool(update.shard), tuple(update.deltas.items()), frozenset(update.feeders), update.creates,
            update.rollup, None if discriminator is None else tuple(discriminator.get_registered_subclasses(model)))


def _built(update: ParentUpdate, spec: ModelSpec) -> Dict[str, Any]:
    model = update.model
    attributes = model.get_attributes()
    actions: List[UpdateAction] = [SEQUENCE.add(1)]
    creates = update.creating
    condition: Any = SHARD.exists() if update.shard else created_parent_condition(model) if creates \
        else parent_condition(model)
    if update.absent and creates:
        condition = spec.keys[0].does_not_exist()
    foreign = foreign_feeders(model) if update.rollup and not update.shard else {}
    if foreign:  # a rollup never counts into an item that another model's relations count into
        fed_elsewhere: Condition = reduce(operator.or_, (FEEDERS.contains(entry) for entry in sorted(foreign)))
        condition = ~fed_elsewhere if condition is None else condition & ~fed_elsewhere
    if creates:
        actions.extend(_created_with(model, spec, update.defaults or {}))
    if update.feeders:  # which relations fed each counter changed here: an audit that cannot see one refuses it
        actions.append(FEEDERS.add(set(update.feeders)))
    counters = spec.counters
    for name, delta in update.deltas.items():
        if delta or creates:  # a first count of 0 still creates the counter, as 0
            actions.insert(-1 - bool(update.feeders), attributes[name].add(delta))
        if delta < 0 and counters[name].shards == 1:
            # the floor of zero, lifted while the parent records shards its model no longer declares: until
            # reshard() folds them in, the parent item holds only part of a formerly sharded counter
            condition &= (attributes[name] >= -delta) | (SHARD_COUNT > spec.shards)
        if delta > 0 and counters[name].limited:
            limit = within_limit(counters[name], delta)
            condition = limit if condition is None else condition & limit
    for mark in update.marks:
        actions.append(mark.path.set(mark.last))
        condition = condition & mark.unseen() if condition is not None else mark.unseen()
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
    return keyed_request(model, update.where, condition=condition, actions=actions)


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


class ShardItem(Action):
    """The creation (an Update setting ``_cshard``) or the deletion of one of a parent's shard items ``1`` and
    up, with the parent, guarded by its key holding nothing or a shard item: never another item. A shard item
    created for a counter fed from the stream starts with the ``marks`` its counter had (``_shard_items``)."""

    def __init__(self, model: Type[Model], key: Tuple[Any, ...], shard: int, create: bool,
                 marks: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(model, key, item_id(model, shard_key(key, shard)))
        self.shard = shard
        self.create = create
        self.marks = dict(marks or {})
        self.verb = "Update" if create else "Delete"  # type: ignore[misc]

    def request(self, token: str) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {"actions": [SHARD.set(self.shard)] + [
            Path([name]).set(mark) for name, mark in sorted(self.marks.items())]} if self.create else {}
        return keyed_request(self.model, self.where, condition=shard_or_absent(self.model), **kwargs)

    def condition_error(self, said: Cancellation) -> CounterError:
        if said.item and not is_shard_item(said.item):
            return ConditionFailedError(foreign_shard_message(self.model, self.key, self.shard), said.error,
                                        **self.about(said))
        return super().condition_error(said)


def shard_items(model: Type[Model], key: Tuple[Any, ...], create: bool, shards: int) -> List[ShardItem]:
    """A sharded parent's shard items ``1`` and up to ``shards`` (its model's
    :attr:`~pynamodb_counters.declare._spec.ModelSpec.shards`), created or deleted with it."""
    return [ShardItem(model, key, shard, create) for shard in range(1, shards)]


class RollupCheck(Action):
    """The check that a rollup found gone is still absent, sent with a write that leaves out what the child
    counted in it: created again since (by a first count), it counts the child after all, and the refusal says
    so."""

    verb = "ConditionCheck"

    def request(self, token: str) -> Dict[str, Any]:
        return key_request(self.model, self.key, condition=spec_of(self.model).keys[0].does_not_exist())

    def condition_error(self, said: Cancellation) -> CounterError:
        return ConditionFailedError(f"rollup {self.label}, found gone, kept being created again while a delete "
                                    f"counted off it was sent; nothing was written", said.error, **self.about(said))


class Passthrough(Action):
    """A write of the caller's that counts nothing, as PynamoDB builds it: a Put, a parent's save (an Update of
    every attribute but its counters, never over another parent's shard item), an Update (of a counted child:
    only if it exists, since it would not be counted if created), a Delete, a ConditionCheck."""

    _VERBS = {WriteKind.PUT: "Put", WriteKind.PARENT_SAVE: "Update", WriteKind.OTHER_UPDATE: "Update",
              WriteKind.OTHER_DELETE: "Delete", WriteKind.CHECK: "ConditionCheck"}

    def __init__(self, write: Write, where: Optional[ItemId] = None) -> None:
        super().__init__(write.model, write.key, where)
        self.write = write
        self.verb = self._VERBS[write.kind]  # type: ignore[misc]
        self.must_exist = write.kind is WriteKind.OTHER_UPDATE and bool(write.spec.relations) and \
            not counting_skipped(write.model)

    def request(self, token: str) -> Dict[str, Any]:
        write, instance = self.write, self.write.instance
        condition = write.condition
        if write.kind is WriteKind.CHECK:
            assert condition is not None
            return key_request(self.model, self.key, condition=condition)
        assert instance is not None
        view = pynamodb_view(instance)
        if write.kind is WriteKind.PUT:
            request: Dict[str, Any] = view.get_save_kwargs_from_instance(
                condition=condition, return_values_on_condition_failure=ALL_OLD)
            return request
        if write.kind is WriteKind.OTHER_DELETE:
            if write.with_shards and write.spec.counters:  # none of its shard items is left behind, and it
                guard = pending_fold(self.model) & not_a_shard()  # is never another parent's shard item
                condition = guard if condition is None else condition & guard
            request = view.get_delete_kwargs_from_instance(condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=write.add_version_condition)
            return request
        actions = list(write.actions)
        if write.kind is WriteKind.PARENT_SAVE:
            condition = not_a_shard() if condition is None else not_a_shard() & condition
            if write.with_shards and write.spec.shards > 1:
                # created in this same transaction; a larger number recorded (a shrink not yet folded) is kept
                actions.append(SHARD_COUNT.set(SHARD_COUNT | write.spec.shards))
        if self.must_exist:
            exists: Condition = write.spec.keys[0].exists()
            condition = exists if condition is None else exists & condition
        request = view.get_update_kwargs_from_instance(actions, condition=condition,
                                                       return_values_on_condition_failure=ALL_OLD,
                                                       add_version_condition=write.add_version_condition)
        return request

    def condition_error(self, said: Cancellation) -> CounterError:
        if self.write.spec.counters and is_shard_item(said.item):
            return ConditionFailedError(shard_item_message(self.model, self.key), said.error, **self.about(said))
        if self.must_exist and not said.item:
            return MissingChildError(f"{self.label} does not exist; an update of a counted child never creates it "
                                     f"(it would not be counted): save() it to create and count it. Nothing was "
                                     f"written", said.error, **self.about(said))
        if self.write.kind is WriteKind.OTHER_DELETE and self.write.instance is not None and said.item:
            pending = pending_fold_refusal(self, said)
            if pending is not None:
                return pending
        return super().condition_error(said)
