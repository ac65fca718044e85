"""
:class:`Write`: one write as the caller asked for it, checked and frozen before anything is planned; and the
guards on caller input, which refuse, before anything is sent, a write that would bypass counting or that the
library cannot carry out as asked, with an error that says what to do instead. Pure, no I/O.

``save()``, ``delete()`` and ``update()``, :class:`~pynamodb_counters.CountedTransaction` and the bulk writes
all build their writes with the same constructors (:func:`save_write`, :func:`delete_write`,
:func:`update_write`, :func:`check_write`), so a write is refused or counted the same way whichever path carries
it. What a write is counted from (the stored child, learned again after a refusal) is not the caller's request
and is not held here: the commit owns it (``_commit``).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Type

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from .._keys import key_of
from ..declare._counted import SPEC_HELD
from ..declare._relations import UNREGISTERED
from ..declare._spec import ModelSpec, spec_of
from ..exceptions import CountingBypassError, InvalidArgumentError
from ._skipping import SKIPPING, counting_skipped
from ._stored import known_values, read_by, stored_as

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["UNSET", "Write", "WriteKind", "action_paths", "bypass_of", "check_child_key", "check_condition",
           "check_counters_unchanged", "check_token", "check_write", "counted_options", "delete_write", "given",
           "guard_update", "key_in", "model_spec", "parent_save_actions", "refuse_options", "save_write", "skipped",
           "update_write", "value"]


_COUNTED = frozenset(("SAVE", "UPDATE", "DELETE", "EXPIRY", "STREAMED"))
_MARKED = frozenset(("EXPIRY", "STREAMED"))


class WriteKind(Enum):
    """What a write is, for the library."""

    SAVE = "save"
    """A counted child's save: a create, or an edit of the stored child it replaces (its counts follow the
    change), as the stored child it is counted from decides."""
    UPDATE = "update"
    """A counted child's ``update()`` that sets what decides its counts to values known before sending."""
    DELETE = "delete"
    """A counted child's delete: its counts are taken off the parents of the stored child."""
    EXPIRY = "expiry"
    """A counted child deleted by DynamoDB's TTL, read from the table's stream: its counts (in the relations
    declared ``expiries="stream"``) are taken off the parents of the deleted child, and a marker of the stream
    record is written instead of the child (``_markers``)."""
    STREAMED = "streamed"
    """A stream record of a child counted from the stream (``counting="stream"``) into parents outside its
    partition: its counts, from the record's old image to its new one, go to those parents, and a marker of the
    stream record is written instead of the child (``_markers``); the child itself was written by anyone."""
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

    counted: bool
    """Whether the write moves counters (a counted child's save, update, delete, expiry or stream record)."""
    marked: bool
    """Whether it counts a stream record, with a marker of the record instead of the child's own write (an expiry,
    or a stream record counted outside its parent's partition)."""

    def __init__(self, label: str) -> None:
        self.counted = self.name in _COUNTED
        self.marked = self.name in _MARKED


@dataclass(frozen=True)
class Write:
    """One write as the caller asked for it.

    :ivar kind: what it is.
    :ivar key: the item's key, as Python values.
    :ivar instance: the model instance written (``None`` for a condition check).
    :ivar condition: the caller's condition (the actions join the library's guards to it when they build their
      requests).
    :ivar actions: an update's actions (a parent's save: the actions that save it without its counters).
    :ivar with_shards: whether the item's own shard items are written with it (created with a new sharded
      parent, or a new child that is one; deleted with a deleted one).
    :ivar known: a counted update's attributes whose stored value is known before sending, raw (``None``:
      removed), by Python name.
    :ivar unknown: a counted update's attributes its other actions touch.
    :ivar event: a marked write's stream record (its ``eventID``), which names its marker.
    :ivar images: a streamed write's child before and after its stream record (its old and new image, as PynamoDB
      loads them; ``None`` where the record has none): what its counts are computed from.
    :ivar spec: the model's declarations, looked up once for the whole write.
    """

    kind: WriteKind
    model: Type[Model]
    spec: ModelSpec = field(compare=False, repr=False)
    key: Tuple[Any, ...]
    instance: Optional[Model] = None
    condition: Optional[Condition] = None
    actions: Tuple[Action, ...] = ()
    add_version_condition: bool = True
    with_shards: bool = False
    known: Dict[str, Any] = field(default_factory=dict)
    unknown: FrozenSet[str] = frozenset()
    event: Optional[str] = None
    images: Tuple[Optional[Model], Optional[Model]] = field(default=(None, None), compare=False, repr=False)


def model_spec(model: type) -> ModelSpec:
    """``model``'s spec, as its class holds it once compiled (``declare._spec.spec_of`` compiles it on first use,
    and again while a relation assigned after a class body waits to be registered)."""
    spec: Optional[ModelSpec] = model.__dict__.get(SPEC_HELD)  # its own, never a base's
    if spec is None or UNREGISTERED:  # a set's truth test
        return spec_of(model)
    return spec


def key_in(instance: Model, spec: ModelSpec) -> Tuple[Any, ...]:
    """``instance``'s key as Python values, ``(hash,)`` or ``(hash, range)``, by the names its model's spec
    holds."""
    names = spec.key_names
    if len(names) == 1:
        return (getattr(instance, names[0]),)
    if names:
        return getattr(instance, names[0]), getattr(instance, names[1])
    return key_of(instance)  # a model the library does not count: its spec names no key


def save_write(instance: Model, condition: Optional[Condition] = None, *, add_version_condition: bool = True,
               spec: Optional[ModelSpec] = None) -> Write:
    """A save of ``instance``: counted when its model is a counted child, a parent's save of everything but its
    counters when it is a parent only, otherwise an ordinary Put.

    :raises CountingBypassError: a counter set by hand.
    :raises InvalidArgumentError: ``condition`` is not a PynamoDB condition, or a counted child's key is incomplete.
    :raises AttributeNullError: PynamoDB's, for a parent's attribute that may not be ``None``.
    """
    model = type(instance)
    spec = spec or model_spec(model)
    check_condition(condition)
    uncounted = skipped(model)
    if not uncounted:
        check_counters_unchanged(instance, spec.counters)
    if uncounted or not spec.counted:
        return Write(WriteKind.PUT, model, spec, key_in(instance, spec), instance, condition)
    if not spec.relations:  # a parent that is not a counted child: every attribute, never its counters
        return Write(WriteKind.PARENT_SAVE, model, spec, key_in(instance, spec), instance, condition,
                     tuple(parent_save_actions(instance)), with_shards=True)
    check_child_key(instance)
    return Write(WriteKind.SAVE, model, spec, key_in(instance, spec), instance, condition, (), add_version_condition,
                 True)


def delete_write(instance: Model, condition: Optional[Condition] = None, *, add_version_condition: bool = True,
                 spec: Optional[ModelSpec] = None) -> Write:
    """A delete of ``instance``: counted when its model is a counted child, otherwise an ordinary Delete (a
    sharded parent's shard items go with it).

    :raises InvalidArgumentError: ``condition`` is not a PynamoDB condition, or a counted child's key is incomplete.
    """
    model = type(instance)
    spec = spec or model_spec(model)
    check_condition(condition)
    uncounted = skipped(model)
    key = key_in(instance, spec)
    if spec.relations and not uncounted:
        check_child_key(instance)
        return Write(WriteKind.DELETE, model, spec, key, instance, condition, (), add_version_condition, True)
    return Write(WriteKind.OTHER_DELETE, model, spec, key, instance, condition, (), add_version_condition,
                 not uncounted)


def update_write(instance: Model, actions: Sequence[Action], condition: Optional[Condition] = None, *,
                 add_version_condition: bool = True, spec: Optional[ModelSpec] = None) -> Write:
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
    spec = spec or model_spec(model)
    check_condition(condition)
    touched = guard_update(instance, actions, counted=True)
    if spec.relations and not skipped(model):
        check_child_key(instance)
    if not touched:
        return Write(WriteKind.OTHER_UPDATE, model, spec, key_in(instance, spec), instance, condition, tuple(actions),
                     add_version_condition)
    known, unknown = known_values(model, actions)
    for name in sorted(unknown & touched):  # refused before any read
        raise bypass_of(model, name)
    return Write(WriteKind.UPDATE, model, spec, key_in(instance, spec), instance, condition, tuple(actions),
                 add_version_condition, known=known, unknown=unknown)


def skipped(model: type) -> bool:
    """Whether writes of ``model`` are uncounted here, inside an open :func:`~pynamodb_counters.skip_counting`
    block naming it (``_skipping``); read from its context variable first, so that a write outside any block makes
    no call for it."""
    return SKIPPING.get() is not None and counting_skipped(model)


def check_write(model: Type[Model], key: Tuple[Any, ...], condition: Condition) -> Write:
    """A condition check on the item ``key`` of ``model``.

    :raises InvalidArgumentError: no condition, or one that is not a PynamoDB condition.
    """
    check_condition(condition)
    if condition is None:
        raise InvalidArgumentError("condition_check() needs a condition")
    return Write(WriteKind.CHECK, model, model_spec(model), key, condition=condition)


def parent_save_actions(instance: Model, spec: Optional[ModelSpec] = None) -> List[Action]:
    """The Update actions that save a parent (or a child's edit) without touching its counters: SET (or REMOVE,
    for ``None``) every other non-key attribute, and start each counter at ``0`` only where it does not exist yet.

    :raises AttributeNullError: PynamoDB's, for an attribute that may not be ``None``, as its ``save()`` raises.
    """
    instance.serialize(null_check=True)  # the same null checks as PynamoDB's save()
    model = type(instance)
    counters = (spec or model_spec(model)).counters
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


# -- guards on caller input ------------------------------------------------------------------------------------
UNSET: Any = object()
"""A counting option (``token=``, ``retry=``, ``ignore_duplicate=``, ``ignore_missing=``) the caller did not give."""


def check_condition(condition: Any) -> None:
    """Refuse a ``condition`` that is not a PynamoDB condition (``None`` is no condition).

    :raises InvalidArgumentError: (a ``TypeError``) naming what a condition looks like.
    """
    if condition is not None and not isinstance(condition, Condition):
        raise InvalidArgumentError(f"condition must be a PynamoDB condition such as Like.liked_at.exists(), not "
                        f"{condition!r}")


def check_child_key(instance: Model) -> None:
    """Refuse a counted child whose own key is incomplete: it is written, and found again, by its key.

    :raises InvalidArgumentError: naming the key attribute that holds ``None``.
    """
    model = type(instance)
    for name in (model._hash_keyname, model._range_keyname):
        if name and getattr(instance, name) is None:
            raise InvalidArgumentError(f"{model.__name__}.{name}, part of its key, is None: a counted child is "
                                       f"written and counted by its key, so set it first. Nothing was written")


def check_token(token: Optional[str]) -> str:
    """``token`` as a write's ``ClientRequestToken``, or a fresh UUID for ``None``.

    :raises InvalidArgumentError: not a string of 1 to 36 characters.
    """
    if token is None:
        return str(uuid.uuid4())
    if not (isinstance(token, str) and 1 <= len(token) <= 36):
        raise InvalidArgumentError(f"a ClientRequestToken is a string of 1 to 36 characters, not {token!r}")
    return token


def check_counters_unchanged(instance: Any, counters: Optional[Dict[str, Any]] = None) -> None:
    """Refuse to save an instance whose counters were set by hand.

    :param counters: its model's counters (:attr:`ModelSpec.counters <pynamodb_counters.declare._spec.ModelSpec>`), when
      already looked up.
    :raises CountingBypassError: a counter differs from the value the instance was loaded with (or last written
      with), or from ``0`` on a new instance.
    """
    if counters is None:
        counters = model_spec(type(instance)).counters
    if not counters:
        return
    item = stored_as(instance) or {}  # what it was loaded as (or last written as); nothing for a new instance
    for name, counter in counters.items():
        value = instance.attribute_values.get(name)
        raw = item.get(counter.attr_name) or {}
        loaded = counter.deserialize(raw["N"]) if "N" in raw else 0
        if value is not None and value != loaded:
            raise CountingBypassError(
                f"{type(instance).__name__}.{name} was set by hand to {value!r}; counters change only through "
                f"counted writes. Use pynamodb_counters.set_counter() to repair one, or skip_counting() for a "
                f"migration. Nothing was written"
            )


def guard_update(instance: Model, actions: Sequence[Action], *, counted: bool = False) -> FrozenSet[str]:
    """Refuse ``update()`` actions that would bypass counting: on counters, on a counted child's key attributes,
    and, unless the update is ``counted`` (its counts moved in the same transaction), on the attributes its
    relations read.

    :returns: the attributes (Python names) its relations read that the actions touch.
    :raises CountingBypassError: naming the attribute and the way around it.
    """
    model = type(instance)
    if skipped(model):
        return frozenset()
    attributes = model.get_attributes()
    spec = model_spec(model)
    protected: Dict[str, str] = {attributes[name].attr_name: f"{model.__name__}.{name} is a counter"
                                 for name in spec.counters}
    decides: Dict[str, str] = {}
    relations = spec.relations
    if relations:
        for name in filter(None, (model._hash_keyname, model._range_keyname)):
            protected[attributes[name].attr_name] = f"{model.__name__}.{name} is part of a counted child's key"
        decides.update((attributes[name].attr_name, name) for name in read_by(spec.counting, (instance,)))
    touched = set()
    for path in action_paths(actions):
        if path in protected:
            raise CountingBypassError(f"{protected[path]}: update() cannot change it without bypassing counting. "
                                      f"Use set_counter() to repair a counter, or wrap a deliberate migration in "
                                      f"skip_counting()")
        if path in decides:
            if not counted:
                raise bypass_of(model, decides[path])
            touched.add(decides[path])
    return frozenset(touched)


def bypass_of(model: Type[Model], name: str) -> CountingBypassError:
    """The refusal of an ``update()`` action on ``name``, an attribute that decides what a counted child counts
    for, where its counts cannot move with it."""
    return CountingBypassError(
        f"{model.__name__}.{name} decides what the child counts for: update() cannot change it here without "
        f"bypassing counting. Load the child, change the attribute and save() it (one transaction that moves its "
        f"counts with it), set it to a plain value with update() (SET to a value or REMOVE: the library knows the "
        f"result and moves the counts), or wrap a deliberate migration in skip_counting()")


def action_paths(actions: Sequence[Action]) -> List[str]:
    """The top-level attribute names (as stored) that ``actions`` write, in order."""
    paths = []
    for action in actions:
        for value in action.values:
            path = getattr(value, "path", None)
            if path and isinstance(value, Path):
                paths.append(path[0].split("[")[0])
                break
    return paths


def counted_options(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The PynamoDB keyword arguments a counted or parent write honours: ``add_version_condition`` only."""
    unknown = sorted(set(kwargs) - {"add_version_condition"})
    if args or unknown:
        raise InvalidArgumentError(f"counted writes take condition=, add_version_condition=, retry= and token=; not "
                        f"{', '.join(unknown) or 'extra positional arguments'} (PynamoDB 5's per-call settings: use "
                        f"Meta.extra_headers)")
    return dict(kwargs)


def refuse_options(instance: Any, write: str, **options: Any) -> None:
    """Refuse the counting options given to a write that is not counted (a parent's save or delete, an update that
    changes nothing a child counts by): dropping them silently would promise what the write does not do.

    :raises InvalidArgumentError: naming them, and what the write is.
    """
    given = sorted(name for name, value in options.items() if value is not UNSET)
    if not given:
        return
    model = type(instance)
    what = (f"{model.__name__}.{write}() changes nothing its counters count by, so it is PynamoDB's own UpdateItem"
            if model_spec(model).relations else
            f"{model.__name__} is a parent, so its {write}() is PynamoDB's own write (counters kept as stored)")
    raise InvalidArgumentError(f"{what}: {', '.join(f'{name}=' for name in given)} apply to counted writes of "
                               f"children (save, delete, and updates of what they count by); leave them out. "
                               f"Nothing was written")


def given(kwargs: Dict[str, Any], **options: Any) -> Dict[str, Any]:
    """``kwargs`` plus the counting options the caller did give, for a model that counts nothing: PynamoDB then
    refuses them with its own ``TypeError``, as it would without the mixin."""
    return {**kwargs, **{name: value for name, value in options.items() if value is not UNSET}}


def value(option: Any) -> Any:
    """A counting option's value, ``None`` (the default) when it was not given."""
    return None if option is UNSET else option
