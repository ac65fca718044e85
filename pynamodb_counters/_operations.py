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
from ._deltas import NONE, Deltas
from ._requests import (
    bypass_of,
    check_child_key,
    check_condition,
    check_counters_unchanged,
    deciding,
    guard_update,
    parent_save_actions,
)
from ._results import CounterChange
from ._spec import counters_of, relations_of
from ._stored import Stored, known_values, stored_of
from .exceptions import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["Operation", "check_operation", "check_token", "classify_save", "delete_operation", "prepare_update",
           "save_operation", "update_operation"]


@dataclass
class Operation:
    """One write as the caller asked for it.

    :ivar kind: ``"counted_put"`` (a new child), ``"counted_edit"`` (a stored child saved again: its counts
      follow the change), ``"counted_update"`` (an ``update()`` that sets what decides its counts) and
      ``"counted_delete"`` for a counted child; ``"put"``, ``"delete"``, ``"update"``,
      ``"check"`` for anything else (a parent's save is an ``"update"`` with :attr:`parent_save`).
    :ivar shards: ``"Update"`` to create the item's own shard items with it, ``"Delete"`` to delete them with it.
    :ivar basis: the stored child a counted edit, update or delete counts from and is conditioned on: the item
      the instance was loaded from (or last saved as), or what a read or a refusal taught, or, for a delete of an
      instance built by hand that names its parents, what it would be stored as.
    :ivar after: a counted update's stored child once written: :attr:`basis` with the actions applied.
    :ivar deltas: a counted child's counter changes, decided by the planner (``_deltas.deltas``).
    :ivar gone_parents: the rollups (parent model, key) found gone: what the child counted in them is not sent.
    :ivar recreated: an edit whose child was deleted since it was loaded, sent as a create.
    :ivar known: a counted update's attributes whose stored value is known before sending, raw (``None``: removed).
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
    basis: Optional[Stored] = None
    after: Optional[Stored] = None
    deltas: Deltas = NONE
    gone_parents: Set[Tuple[Any, Tuple[Any, ...]]] = field(default_factory=set)
    recreated: bool = False
    known: Dict[str, Any] = field(default_factory=dict)
    unknown: FrozenSet[str] = frozenset()

    @property
    def changes(self) -> Tuple[CounterChange, ...]:
        """The counter changes the planner decided (none before planning)."""
        return self.deltas.changes


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
    check_child_key(instance)
    op = Operation("counted_put", model, key_of(instance), instance, condition,
                   add_version_condition=add_version_condition)
    classify_save(op, stored_of(instance))
    return op


def classify_save(op: Operation, basis: Optional[Stored]) -> None:
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
    if counted:
        check_child_key(instance)
    return Operation("counted_delete" if counted else "delete", model, key_of(instance), instance, condition,
                     add_version_condition=add_version_condition, shards="" if skipped else "Delete",
                     basis=stored_of(instance) if counted else None)


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
    if relations_of(type(instance)) and not counting_skipped(type(instance)):
        check_child_key(instance)
    if not touched:
        return Operation("update", type(instance), key_of(instance), instance, condition, list(actions),
                         add_version_condition)
    known, unknown = known_values(type(instance), actions)
    for name in sorted(unknown & touched):  # refused before any read
        raise bypass_of(type(instance), name)
    # it sets what decides the child's counts: a counted update, from the stored state (read first if unknown)
    op = Operation("counted_update", type(instance), key_of(instance), instance, condition, list(actions),
                   add_version_condition, basis=stored_of(instance), known=known, unknown=unknown)
    if op.basis is not None:
        prepare_update(op)
    return op


def prepare_update(op: Operation) -> None:
    """Set a counted update's :attr:`~Operation.after`: its stored child with the actions whose result is known
    applied.

    :raises CountingBypassError: an action whose result is not known before sending (``ADD``, arithmetic,
      ``if_not_exists``...) on an attribute that decides what the child counts for.
    """
    assert op.basis is not None
    after = op.basis.updated(op.known)
    for name in sorted(op.unknown.intersection(deciding(op.model, op.basis.view, after.view))):  # keys: refused
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
