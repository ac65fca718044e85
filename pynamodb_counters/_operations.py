"""
:class:`Operation`: one write as the caller asked for it (a counted save or delete, or any other PynamoDB write),
checked and classified before any planning. Pure, no I/O.

:class:`~pynamodb_counters.CountedTransaction` and bulk writes collect their writes with the same constructors
(:func:`save_operation`, :func:`delete_operation`, :func:`update_operation`, :func:`check_operation`), so a
write is refused or counted the same way whichever path carries it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Type

from ._compat import key_of
from ._context import counting_skipped
from ._requests import (
    bypass_of,
    check_condition,
    check_counters_unchanged,
    deciding,
    guard_update,
    known_values,
    parent_save_actions,
)
from ._results import CounterChange
from ._spec import counters_of, relations_of
from .exceptions import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["Operation", "check_operation", "check_token", "classify_save", "delete_operation", "prepare_update",
           "remember_stored", "save_operation", "stored_state", "update_operation"]


@dataclass
class Operation:
    """One write as the caller asked for it.

    :ivar kind: ``"counted_put"`` (a new child), ``"counted_edit"`` (a stored child saved again: its counts
      follow the change), ``"counted_update"`` (an ``update()`` that sets what decides its counts) and
      ``"counted_delete"`` for a counted child; ``"put"``, ``"delete"``, ``"update"``,
      ``"check"`` for anything else (a parent's save is an ``"update"`` with :attr:`parent_save`).
    :ivar shards: ``"Update"`` to create the item's own shard items with it, ``"Delete"`` to delete them with it.
    :ivar changes: a counted child's counter changes, computed by the planner: :attr:`removed`, then
      :attr:`added`, then :attr:`changed`.
    :ivar removed: the changes of the relations the child stops counting for (or moves away from).
    :ivar added: the changes of the relations the child starts counting for (or moves to).
    :ivar changed: the changes of the relations whose parent stays and whose amount changes.
    :ivar basis: the stored state a counted edit, update or delete counts from: the item the instance was loaded
      from (or last saved as), or what a read or a refusal taught.
    :ivar after: a counted update's new state: :attr:`basis` with the actions applied.
    :ivar counted: the planner's changes, each with its relation.
    :ivar gone_parents: the rollups (parent model, key) found gone: their decrements are not sent.
    :ivar gone: the changes not sent because their rollup was gone.
    :ivar recreated: an edit whose child was deleted since it was loaded, sent as a create.
    :ivar known: a counted update's attributes whose new value is known before sending, with the value.
    :ivar unknown: a counted update's attributes its other actions touch.
    """

    kind: str
    model: Type[Model]
    key: Tuple[Any, ...]
    instance: Optional[Model] = None
    condition: Optional[Condition] = None
    actions: List[Action] = field(default_factory=list)
    add_version_condition: bool = True
    parent_save: bool = False
    shards: str = ""
    changes: Tuple[CounterChange, ...] = ()
    basis: Optional[Model] = None
    removed: Tuple[CounterChange, ...] = ()
    added: Tuple[CounterChange, ...] = ()
    changed: Tuple[CounterChange, ...] = ()
    after: Optional[Model] = None
    counted: List[Tuple[Any, CounterChange]] = field(default_factory=list)
    gone_parents: Set[Tuple[Any, Tuple[Any, ...]]] = field(default_factory=set)
    gone: Tuple[CounterChange, ...] = ()
    recreated: bool = False
    known: Dict[str, Any] = field(default_factory=dict)
    unknown: FrozenSet[str] = frozenset()

    @property
    def counted_state(self) -> Optional[Model]:
        """What a counted child's deltas are computed from: the stored state when a read or a refusal taught
        it, else the instance as the caller holds it."""
        return self.basis if self.basis is not None else self.instance


_STORED = "_pynamodb_counters_stored"  # on a counted child: the raw item it was loaded from, or last saved as


def remember_stored(instance: Any, item: Optional[Dict[str, Any]]) -> None:
    """Record that ``instance`` is stored as ``item`` (a raw DynamoDB item), or, with ``None``, that it is not
    stored any more (deleted)."""
    if item is None:
        instance.__dict__.pop(_STORED, None)
    else:
        instance.__dict__[_STORED] = item


def stored_state(instance: Model) -> Optional[Model]:
    """The stored child ``instance`` was loaded from (or last saved as), as an instance of its model; ``None`` for
    an instance that was never loaded or saved, or whose key was changed since."""
    item = instance.__dict__.get(_STORED)
    if item is None:
        return None
    stored = type(instance).from_raw_data(item)
    return stored if key_of(stored) == key_of(instance) else None


def check_token(token: Optional[str]) -> str:
    """``token`` as a write's ``ClientRequestToken``, or a fresh UUID for ``None``.

    :raises InvalidArgumentError: not a string of 1 to 36 characters.
    """
    if token is None:
        return str(uuid.uuid4())
    if not (isinstance(token, str) and 1 <= len(token) <= 36):
        raise InvalidArgumentError(f"a ClientRequestToken is a string of 1 to 36 characters, not {token!r}")
    return token


def save_operation(instance: Model, condition: Optional[Condition] = None, *,
                   add_version_condition: bool = True) -> Operation:
    """A save of ``instance``: counted (a guarded Put plus its counter deltas) when its model is a counted child,
    a parent's save of everything but its counters when it is a parent only, otherwise an ordinary Put.

    :raises CountingBypassError: a counter set by hand.
    :raises TypeError: ``condition`` is not a PynamoDB condition.
    """
    model = type(instance)
    check_condition(condition)
    skipped = counting_skipped(model)
    if not skipped:
        check_counters_unchanged(instance)
    counted = bool(relations_of(model)) and not skipped
    if counters_of(model) and not counted and not skipped:
        # a parent that is not a counted child: save its other attributes, never its counters
        return Operation("update", model, key_of(instance), instance, condition, parent_save_actions(instance),
                         parent_save=True, shards="Update")
    if not counted:
        return Operation("put", model, key_of(instance), instance, condition)
    op = Operation("counted_put", model, key_of(instance), instance, condition,
                   add_version_condition=add_version_condition)
    classify_save(op, stored_state(instance))
    return op


def classify_save(op: Operation, basis: Optional[Model]) -> None:
    """Make ``op``, a counted child's save, an edit of ``basis`` (the stored child it replaces: its counts follow
    the change) or, for ``None``, a create (a guarded Put, its own shard items created with it)."""
    assert op.instance is not None
    op.basis = basis
    if basis is None:
        op.kind, op.actions, op.shards = "counted_put", [], "Update"
    else:
        op.kind, op.actions, op.shards = "counted_edit", parent_save_actions(op.instance), ""


def delete_operation(instance: Model, condition: Optional[Condition] = None, *,
                     add_version_condition: bool = True) -> Operation:
    """A delete of ``instance``: counted (a guarded Delete plus negative deltas) when its model is a counted
    child, otherwise an ordinary Delete (a sharded parent's shard items go with it).

    :raises TypeError: ``condition`` is not a PynamoDB condition.
    """
    model = type(instance)
    check_condition(condition)
    skipped = counting_skipped(model)
    counted = bool(relations_of(model)) and not skipped
    return Operation("counted_delete" if counted else "delete", model, key_of(instance), instance, condition,
                     add_version_condition=add_version_condition, shards="" if skipped else "Delete",
                     basis=stored_state(instance) if counted else None)


def update_operation(instance: Model, actions: Sequence[Action], condition: Optional[Condition] = None, *,
                     add_version_condition: bool = True) -> Operation:
    """An update of ``instance`` with PynamoDB ``actions``.

    :raises CountingBypassError: an action on a counter, on a counted child's key, or on an attribute its
      relations read to find the parent.
    :raises TypeError: no actions, or ``condition`` is not a PynamoDB condition.
    """
    if not actions:
        raise InvalidArgumentError("update() needs a non-empty list of actions")
    check_condition(condition)
    touched = guard_update(instance, actions, counted=True)
    if not touched:
        return Operation("update", type(instance), key_of(instance), instance, condition, list(actions),
                         add_version_condition)
    known, unknown = known_values(type(instance), actions)
    for name in sorted(unknown & touched):  # refused before any read
        raise bypass_of(type(instance), name)
    # it sets what decides the child's counts: a counted update, from the stored state (read first if unknown)
    op = Operation("counted_update", type(instance), key_of(instance), instance, condition, list(actions),
                   add_version_condition, basis=stored_state(instance), known=known, unknown=unknown)
    if op.basis is not None:
        prepare_update(op)
    return op


def prepare_update(op: Operation) -> None:
    """Set a counted update's :attr:`~Operation.after`: its stored state with the actions whose result is known
    applied.

    :raises CountingBypassError: an action whose result is not known before sending (``ADD``, arithmetic,
      ``if_not_exists``...) on an attribute that decides what the child counts for.
    """
    assert op.basis is not None
    after = op.model.from_raw_data(op.basis.serialize(null_check=False))
    for name, value in op.known.items():
        setattr(after, name, value)
    for name in sorted(op.unknown.intersection(deciding(op.model, op.basis, after))):  # keys: refused already
        raise bypass_of(op.model, name)
    op.after = after


def check_operation(model: Type[Model], key: Tuple[Any, ...], condition: Condition) -> Operation:
    """A condition check on the item ``key`` of ``model``.

    :raises TypeError: ``condition`` is not a PynamoDB condition.
    """
    check_condition(condition)
    if condition is None:
        raise InvalidArgumentError("condition_check() needs a condition")
    return Operation("check", model, key, condition=condition)
