"""
A counted child as DynamoDB stores it: :class:`Stored`, the raw item, and PynamoDB's loaded view of it (defaults
applied, NULL and absent attributes read as their default or ``None``), the one view every count is decided
from, as an audit recounts it. No I/O; the one state it writes is what each instance remembers being stored as
(:func:`remember_stored`, :func:`forget_stored`), on the instance.

A write is conditioned on the raw item (an attribute absent stays absent, a NULL stays NULL) and counted from
the view: so a stored child whose item lacks an attribute added to the model later, or holds it as NULL, is
edited and deleted like any other, and counted as PynamoDB loads it.

What decides a child's counts is what its relations' functions read of it: a :class:`Recorder` stands in for the
child while they run (``_deltas`` runs them once per state, through one), and an edit's, update's or delete's
condition covers the attributes recorded (:meth:`Stored.unchanged`).
"""
from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple, Type

from pynamodb.constants import NULL
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import RemoveAction, SetAction

from .._keys import key_of
from ..declare._spec import ModelSpec, spec_of

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["Recorder", "Stored", "as_loaded", "deciding_attributes", "forget_stored", "known_values", "read_by",
           "remember_stored", "stored_as", "stored_of"]

_MEMORY = "_pynamodb_counters_stored"  # on a counted instance: the raw item it was loaded from, or last written as


class Stored:
    """A counted child as stored: its raw item (:attr:`item`), and PynamoDB's view of it (:attr:`view`), each
    built once, when first read (the stored form of an instance built by hand is serialized only if a condition
    needs it: :meth:`of_instance`).

    :ivar model: the child's model.
    """

    __slots__ = ("model", "_item", "_view")

    def __init__(self, model: Type[Model], item: Optional[Dict[str, Any]], view: Optional[Model] = None) -> None:
        self.model = model
        self._item = item
        self._view = view

    @classmethod
    def of_instance(cls, instance: Model, spec: Optional[ModelSpec] = None) -> Stored:
        """What ``instance`` would be stored as (its item serialized only if a condition needs it), counted as
        PynamoDB would load it: for an instance built by hand, whose stored item nobody has read.

        :param spec: its model's spec, when looked up already."""
        return cls(type(instance), None, as_loaded(instance, spec))

    @property
    def item(self) -> Dict[str, Any]:
        """The raw item."""
        if self._item is None:
            assert self._view is not None
            self._item = self._view.serialize(null_check=False)
        return self._item

    @property
    def view(self) -> Model:
        """The child as PynamoDB loads the item: what its counts are decided from."""
        if self._view is None:
            self._view = self.model.from_raw_data(dict(self.item))
        return self._view

    def holds(self, attr_name: str) -> Optional[Dict[str, Any]]:
        """The attribute's raw value, ``None`` where the item lacks it."""
        value: Optional[Dict[str, Any]] = self.item.get(attr_name)
        return value

    def unchanged(self, names: Iterable[str]) -> Optional[Condition]:
        """The condition that the stored item holds, for each of the attributes ``names`` (Python names), what
        this one holds: absent stays absent, NULL stays NULL, any other value the same value."""
        attributes = self.model.get_attributes()
        condition: Optional[Condition] = None
        for name in names:
            raw = self.holds(attributes[name].attr_name)
            path = Path(attributes[name])
            same: Condition = path.does_not_exist() if raw is None else path.is_type(NULL) if NULL in raw \
                else path == Value(raw)
            condition = same if condition is None else condition & same
        return condition

    def differs(self, other: Stored, names: Iterable[str]) -> bool:
        """Whether ``other`` holds another raw value than this one for any of the attributes ``names``."""
        attributes = self.model.get_attributes()
        return any(self.holds(attributes[name].attr_name) != other.holds(attributes[name].attr_name)
                   for name in names)

    def updated(self, known: Dict[str, Optional[Dict[str, Any]]]) -> Stored:
        """The stored child once ``known`` (raw values by Python name, ``None`` for a REMOVE) is applied."""
        attributes = self.model.get_attributes()
        item = dict(self.item)
        for name, raw in known.items():
            if raw is None:
                item.pop(attributes[name].attr_name, None)
            else:
                item[attributes[name].attr_name] = raw
        return Stored(self.model, item)


def as_loaded(instance: Model, spec: Optional[ModelSpec] = None) -> Model:
    """``instance`` as PynamoDB would load it once stored: the instance itself, unless an attribute it holds as
    ``None`` (or as an empty set, which is not stored) has a default, which loading gives it instead.

    :param spec: its model's spec, when looked up already.
    """
    loads_otherwise = (spec or spec_of(type(instance))).loads_otherwise
    if loads_otherwise:
        values = instance.attribute_values
        for name in loads_otherwise:
            value = values.get(name)
            if value is None or (isinstance(value, (set, frozenset)) and not value):
                return type(instance).from_raw_data(instance.serialize(null_check=False))
    return instance


def deciding_attributes(model: Type[Model], read: Iterable[str]) -> Tuple[str, ...]:
    """The non-key attributes of ``model`` among the names ``read`` of a child of it (by its relations'
    functions, or declared with ``reads=``), in order: what decides its parents, and what a counted edit, update
    or delete is conditioned on."""
    attributes = model.get_attributes()
    keys = (model._hash_keyname, model._range_keyname)
    return tuple(sorted(name for name in set(read) if name in attributes and name not in keys))


def read_by(relations: Iterable[Any], states: Iterable[Any]) -> Set[str]:
    """The attributes (Python names) that decide what a child adds to which parent, in any of ``states`` (the
    child's instances): each relation's declared ``reads``, plus those its key, ``when=`` and ``amount=``
    functions touch on each state (found by running them on a :class:`Recorder`; a function that fails on one
    counts what it read before failing). For a state no count has been decided from: ``update()`` asks it of the
    instance it is given, before anything is read; a counted write records what it reads as it decides
    (``_deltas``).

    :param relations: :class:`~pynamodb_counters.Relation` or their compiled specs: each holds ``reads`` and
      ``functions``.
    """
    states = tuple(states)
    names: Set[str] = set()
    for relation in relations:
        names.update(relation.reads)
        for state in states:
            recorder = Recorder(state, names)
            for function in relation.functions:
                if function is None:
                    continue
                try:
                    function(recorder)
                except Exception:  # detection is best effort
                    pass
    attributes = [state.get_attributes() for state in states[:1]]
    return {name for name in names if not attributes or name in attributes[0]}


class Recorder:
    """Stands in for a child and records the names read from it (in the set it is given), passing each read on
    to the child.

    A read of a property, a ``functools.cached_property`` or a method of the child's own model classes runs it
    on the recorder, so that the attributes it reads are recorded too. The recorder reaches its own state
    through its slot descriptors, never by name: a child attribute of any name (``seen``, ``_target``...) is
    recorded like any other."""

    __slots__ = ("_recorder_target", "_recorder_seen")

    def __init__(self, target: Any, seen: Set[str]) -> None:
        _TARGET.__set__(self, target)
        _SEEN.__set__(self, seen)

    def __getattribute__(self, name: str) -> Any:
        _SEEN.__get__(self).add(name)
        target = _TARGET.__get__(self)
        followed = _followed(type(target), name)
        if followed is None:
            return getattr(target, name)
        if isinstance(followed, property):
            return followed.fget(self)  # type: ignore[misc]
        if isinstance(followed, functools.cached_property):
            return followed.func(self)
        return types.MethodType(followed, self)


_TARGET = Recorder.__dict__["_recorder_target"]
_SEEN = Recorder.__dict__["_recorder_seen"]
_FOLLOWED: Dict[Tuple[type, str], Any] = {}


def _followed(model: type, name: str) -> Any:
    """What a recorder runs itself for a read of ``name`` on an instance of ``model``: a property (with a getter),
    a cached property or a plain function, defined on one of the user's model classes (not on PynamoDB's or this
    library's), whose own reads then reach the recorder; ``None`` for anything else."""
    try:
        return _FOLLOWED[(model, name)]
    except KeyError:
        pass
    found = None
    for klass in model.__mro__:
        if name in klass.__dict__:
            value = klass.__dict__[name]
            own = klass.__module__.split(".")[0] not in ("pynamodb", "pynamodb_counters", "builtins")
            if own and ((isinstance(value, property) and value.fget is not None) or
                        isinstance(value, (functools.cached_property, types.FunctionType))):
                found = value
            break
    _FOLLOWED[(model, name)] = found
    return found


def remember_stored(instance: Any, item: Dict[str, Any]) -> None:
    """Record that ``instance`` is stored as ``item`` (a raw DynamoDB item)."""
    instance.__dict__[_MEMORY] = item


def forget_stored(instance: Any) -> None:
    """Record that ``instance`` is not stored any more (deleted)."""
    instance.__dict__.pop(_MEMORY, None)


def stored_as(instance: Any) -> Optional[Dict[str, Any]]:
    """The raw item a counted instance (a child or a parent) was loaded from, or last written as; ``None`` for
    one never loaded or written (or deleted since). The one record of "as loaded": an edit counts from it, and a
    counter that differs from it was set by hand."""
    item: Optional[Dict[str, Any]] = instance.__dict__.get(_MEMORY)
    return item


def stored_of(instance: Model, key: Optional[Tuple[Any, ...]] = None) -> Optional[Stored]:
    """The stored child ``instance`` was loaded from (or last saved as); ``None`` for an instance that was never
    loaded or saved, or whose key (``key``, when known already) was changed since."""
    item = stored_as(instance)
    if item is None:
        return None
    stored = Stored(type(instance), item)
    return stored if _key_of_item(type(instance), item) == (key or key_of(instance)) else None


def _key_of_item(model: Type[Model], item: Dict[str, Any]) -> Tuple[Any, ...]:
    attributes = model.get_attributes()
    names = [model._hash_keyname] + ([model._range_keyname] if model._range_keyname else [])
    key: List[Any] = []
    for name in names:
        attribute = attributes[name]  # type: ignore[index]
        raw = item.get(attribute.attr_name)
        key.append(None if raw is None else attribute.deserialize(attribute.get_value(raw)))
    return tuple(key)


def known_values(model: Type[Model], actions: Iterable[Action]
                 ) -> Tuple[Dict[str, Optional[Dict[str, Any]]], FrozenSet[str]]:
    """What ``actions`` store, where the result is known before sending: a top-level attribute SET to a value (its
    raw value, NULL included) or REMOVEd (``None``), by Python name; and the Python names of the attributes the
    other actions touch (ADD, DELETE, arithmetic, ``if_not_exists``, list appends, nested paths)."""
    by_stored = {attribute.attr_name: name for name, attribute in model.get_attributes().items()}
    known: Dict[str, Optional[Dict[str, Any]]] = {}
    unknown = set()
    for action in actions:
        path = getattr(action.values[0], "path", None) or [""]
        name = by_stored.get(path[0].split("[")[0])
        if name is None:
            continue
        top_level = len(path) == 1 and "[" not in path[0]
        if top_level and isinstance(action, RemoveAction):
            known[name] = None
        elif top_level and isinstance(action, SetAction) and type(action.values[1]) is Value:
            known[name] = action.values[1].value
        else:
            unknown.add(name)
    return known, frozenset(unknown)
