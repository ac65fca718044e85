"""
A counted child as DynamoDB stores it: :class:`Stored`, the raw item, and PynamoDB's loaded view of it (defaults
applied, NULL and absent attributes read as their default or ``None``), the one view every count is decided
from, as an audit recounts it. No I/O; the one state it
writes is what each instance remembers being stored as (:func:`remember`, :func:`forget`), on the instance.

A write is conditioned on the raw item (an attribute absent stays absent, a NULL stays NULL) and counted from
the view: so a stored child whose item lacks an attribute added to the model later, or holds it as NULL, is
edited and deleted like any other, and counted as PynamoDB loads it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Optional, Tuple, Type

from pynamodb.constants import NULL
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import RemoveAction, SetAction

from .._compat import key_of
from ..declare._relations import read_by
from ..declare._spec import ModelSpec, spec_of

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["Stored", "as_loaded", "deciding", "forget", "known_values", "remember", "remembered", "stored_of"]

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
    def of_instance(cls, instance: Model) -> Stored:
        """What ``instance`` would be stored as (its item serialized only if a condition needs it), counted as
        PynamoDB would load it: for an instance built by hand, whose stored item nobody has read."""
        return cls(type(instance), None, as_loaded(instance))

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

    def kept(self, *others: Model, spec: Optional[ModelSpec] = None) -> Optional[Condition]:
        """The condition that the stored item still holds what this one holds (:meth:`unchanged`) for each of the
        attributes that decide the child's parents, read on this one as loaded and on ``others`` (:func:`deciding`):
        what an edit, update or delete counted from this one is conditioned on.

        :param spec: the model's spec, when looked up already.
        """
        states: List[Model] = [self.view]
        states.extend(other for other in others if all(other is not state for state in states))
        return self.unchanged(deciding(self.model, *states, spec=spec))

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
    fragile = (spec or spec_of(type(instance))).fragile
    if fragile:
        values = instance.attribute_values
        for name in fragile:
            value = values.get(name)
            if value is None or (isinstance(value, (set, frozenset)) and not value):
                return type(instance).from_raw_data(instance.serialize(null_check=False))
    return instance


def deciding(model: Type[Model], *states: Model, spec: Optional[ModelSpec] = None) -> List[str]:
    """The non-key attributes that decide a counted child's parents (read by its relations), in any of
    ``states``: what a counted edit, update or delete is conditioned on.

    :param spec: ``model``'s spec, when looked up already.
    """
    keys = {model._hash_keyname, model._range_keyname}
    relations = (spec or spec_of(model)).relations
    return sorted(read_by(relations, states) - keys)


def remember(instance: Any, item: Dict[str, Any]) -> None:
    """Record that ``instance`` is stored as ``item`` (a raw DynamoDB item)."""
    instance.__dict__[_MEMORY] = item


def forget(instance: Any) -> None:
    """Record that ``instance`` is not stored any more (deleted)."""
    instance.__dict__.pop(_MEMORY, None)


def remembered(instance: Any) -> Optional[Dict[str, Any]]:
    """The raw item a counted instance (a child or a parent) was loaded from, or last written as; ``None`` for
    one never loaded or written (or deleted since). The one record of "as loaded": an edit counts from it, and a
    counter that differs from it was set by hand."""
    item: Optional[Dict[str, Any]] = instance.__dict__.get(_MEMORY)
    return item


def stored_of(instance: Model, key: Optional[Tuple[Any, ...]] = None) -> Optional[Stored]:
    """The stored child ``instance`` was loaded from (or last saved as); ``None`` for an instance that was never
    loaded or saved, or whose key (``key``, when known already) was changed since."""
    item = remembered(instance)
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
