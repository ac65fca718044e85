"""
:class:`Write`: one write as the caller asked for it, checked and frozen before anything is planned. Pure, no
I/O.

``save()``, ``delete()`` and ``update()``, :class:`~pynamodb_counters.CountedTransaction` and the bulk writes
all build their writes with the same constructors (:func:`save_write`, :func:`delete_write`,
:func:`update_write`, :func:`check_write`), so a write is refused or counted the same way whichever path carries
it. What a write is counted from (the stored child, learned again after a refusal) is not the caller's request
and is not held here: the commit owns it (``_commit``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Type

from ._compat import key_of
from ._context import counting_skipped
from ._guards import bypass_of, check_child_key, check_condition, check_counters_unchanged, guard_update
from ._spec import counters_of, relations_of
from ._stored import known_values
from .exceptions import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["Write", "WriteKind", "check_write", "delete_write", "parent_save_actions", "save_write", "update_write"]


class WriteKind(Enum):
    """What a write is, for the library."""

    SAVE = "save"
    """A counted child's save: a create, or an edit of the stored child it replaces (its counts follow the
    change), as the stored child it is counted from decides."""
    UPDATE = "update"
    """A counted child's ``update()`` that sets what decides its counts to values known before sending."""
    DELETE = "delete"
    """A counted child's delete: its counts are taken off the parents of the stored child."""
    PARENT_SAVE = "parent save"
    """A parent's save: every attribute but its counters (which only counted writes change)."""
    PUT = "put"
    """Any other save: a model that counts nothing, or one whose counting is skipped."""
    OTHER_UPDATE = "other update"
    """Any other ``update()``: of a parent, or of a counted child changing nothing it counts by (then guarded by
    the child's existence: it would not be counted if created)."""
    OTHER_DELETE = "other delete"
    """Any other delete (a parent's shard items are deleted with it)."""
    CHECK = "check"
    """A condition check."""

    @property
    def counted(self) -> bool:
        """Whether the write moves counters (a counted child's save, update or delete)."""
        return self in _COUNTED


_COUNTED = frozenset((WriteKind.SAVE, WriteKind.UPDATE, WriteKind.DELETE))


@dataclass(frozen=True)
class Write:
    """One write as the caller asked for it.

    :ivar kind: what it is.
    :ivar key: the item's key, as Python values.
    :ivar instance: the model instance written (``None`` for a condition check).
    :ivar condition: the caller's condition, combined with the library's guards.
    :ivar actions: an update's actions (a parent's save: the actions that save it without its counters).
    :ivar with_shards: whether the item's own shard items are written with it (created with a new sharded
      parent, or a new child that is one; deleted with a deleted one).
    :ivar known: a counted update's attributes whose stored value is known before sending, raw (``None``:
      removed), by Python name.
    :ivar unknown: a counted update's attributes its other actions touch.
    """

    kind: WriteKind
    model: Type[Model]
    key: Tuple[Any, ...]
    instance: Optional[Model] = None
    condition: Optional[Condition] = None
    actions: Tuple[Action, ...] = ()
    add_version_condition: bool = True
    with_shards: bool = False
    known: Dict[str, Any] = field(default_factory=dict)
    unknown: FrozenSet[str] = frozenset()


def save_write(instance: Model, condition: Optional[Condition] = None, *, add_version_condition: bool = True
               ) -> Write:
    """A save of ``instance``: counted when its model is a counted child, a parent's save of everything but its
    counters when it is a parent only, otherwise an ordinary Put.

    :raises CountingBypassError: a counter set by hand.
    :raises InvalidArgumentError: ``condition`` is not a PynamoDB condition, or a counted child's key is incomplete.
    """
    model = type(instance)
    check_condition(condition)
    skipped = counting_skipped(model)
    if not skipped:
        check_counters_unchanged(instance)
    if skipped or not (relations_of(model) or counters_of(model)):
        return Write(WriteKind.PUT, model, key_of(instance), instance, condition)
    if not relations_of(model):  # a parent that is not a counted child: every attribute, never its counters
        return Write(WriteKind.PARENT_SAVE, model, key_of(instance), instance, condition,
                     tuple(parent_save_actions(instance)), with_shards=True)
    check_child_key(instance)
    return Write(WriteKind.SAVE, model, key_of(instance), instance, condition, (), add_version_condition, True)


def delete_write(instance: Model, condition: Optional[Condition] = None, *, add_version_condition: bool = True
                 ) -> Write:
    """A delete of ``instance``: counted when its model is a counted child, otherwise an ordinary Delete (a
    sharded parent's shard items go with it).

    :raises InvalidArgumentError: ``condition`` is not a PynamoDB condition, or a counted child's key is incomplete.
    """
    model = type(instance)
    check_condition(condition)
    skipped = counting_skipped(model)
    if relations_of(model) and not skipped:
        check_child_key(instance)
        return Write(WriteKind.DELETE, model, key_of(instance), instance, condition, (), add_version_condition,
                     True)
    return Write(WriteKind.OTHER_DELETE, model, key_of(instance), instance, condition, (), add_version_condition,
                 not skipped)


def update_write(instance: Model, actions: Sequence[Action], condition: Optional[Condition] = None, *,
                 add_version_condition: bool = True) -> Write:
    """An update of ``instance`` with PynamoDB ``actions``: counted when they set what decides a counted child's
    counts to values known before sending.

    :raises CountingBypassError: an action on a counter or on a counted child's key, or one whose result is not
      known before sending on what decides a counted child's counts.
    :raises InvalidArgumentError: no actions, ``condition`` is not a PynamoDB condition, or a counted child's key
      is incomplete.
    """
    if not actions:
        raise InvalidArgumentError("update() needs a non-empty list of actions")
    model = type(instance)
    check_condition(condition)
    touched = guard_update(instance, actions, counted=True)
    if relations_of(model) and not counting_skipped(model):
        check_child_key(instance)
    if not touched:
        return Write(WriteKind.OTHER_UPDATE, model, key_of(instance), instance, condition, tuple(actions),
                     add_version_condition)
    known, unknown = known_values(model, actions)
    for name in sorted(unknown & touched):  # refused before any read
        raise bypass_of(model, name)
    return Write(WriteKind.UPDATE, model, key_of(instance), instance, condition, tuple(actions),
                 add_version_condition, known=known, unknown=unknown)


def check_write(model: Type[Model], key: Tuple[Any, ...], condition: Condition) -> Write:
    """A condition check on the item ``key`` of ``model``.

    :raises InvalidArgumentError: no condition, or one that is not a PynamoDB condition.
    """
    check_condition(condition)
    if condition is None:
        raise InvalidArgumentError("condition_check() needs a condition")
    return Write(WriteKind.CHECK, model, key, condition=condition)


def parent_save_actions(instance: Model) -> List[Action]:
    """The Update actions that save a parent (or a child's edit) without touching its counters: SET (or REMOVE,
    for ``None``) every other non-key attribute, and start each counter at ``0`` only where it does not exist yet.

    :raises AttributeNullError: PynamoDB's, for an attribute that may not be ``None``, as its ``save()`` raises.
    """
    instance.serialize(null_check=True)  # the same null checks as PynamoDB's save()
    model = type(instance)
    counters = counters_of(model)
    skip = {model._hash_keyname, model._range_keyname, model._version_attribute_name}
    actions: List[Action] = []
    for name, attribute in model.get_attributes().items():
        if name in skip:
            continue
        if name in counters:
            actions.append(attribute.set(attribute | 0))
            continue
        value = getattr(instance, name)
        actions.append(attribute.remove() if value is None else attribute.set(value))
    return actions
