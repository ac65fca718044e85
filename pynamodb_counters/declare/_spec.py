"""
One :class:`ModelSpec` per model: what the library needs to know of a model's declarations, built once and held
on the class, and carried by each of its writes (:attr:`~pynamodb_counters.write._writes.Write.spec`); with it,
each relation counting the model compiled into a :class:`RelationSpec`: the parent model and its spec, the stored
counter, the feeder entry, the shards, the key's shape and the user's functions. The write path reads them as
plain attributes: on a warm path it never calls into the declarations (this folder) again, and runs the user's
functions itself (``write._deltas``).

Declarations only, no I/O. A model's counters and relations are fixed once its class is built (PynamoDB fills in
a class's attributes after the ``__set_name__`` calls, so the spec is built on first use, not at declaration),
but for a relation assigned after a class body (a tree, ``Category.parent = counted_by(Category.subcategories,
...)``): it is registered when a spec of its model is built, or when its counter's feeders are asked for, and
any spec built before it is dropped. The relations feeding a counter are held on the counter itself, since child
models may be declared (and imported) after their parent.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, Type

from pynamodb.attributes import Attribute, UnicodeAttribute
from pynamodb.constants import BINARY_SET, NUMBER_SET, STRING_SET

from .._keys import discriminator_of, key_attributes
from ..exceptions import ConfigurationError
from ._attributes import CounterField
from ._counted import SPEC_HELD, CountedBase, counted_classes, declared, same_class
from ._counting_rule import CountingRule
from ._expiry_rules import STREAM
from ._feeder_ids import feeder_clash, feeder_id, legacy_feeder_id
from ._identity import Identity, compile_identity, confused, confusion, models_in, related
from ._relations import REGISTERING, UNREGISTERED, Relation, made
from ._stored_names import FEEDER_SEPARATOR

__all__ = ["ModelSpec", "RelationSpec", "all_relations", "check_feeder_ids", "check_told_apart", "compile_relation",
           "counters_of", "feeders_of", "foreign_feeders", "identity_of", "relations_of", "shard_count", "spec_of"]

_SET_TYPES = frozenset((STRING_SET, NUMBER_SET, BINARY_SET))


@dataclass(frozen=True)
class ModelSpec:
    """A model's counting declarations.

    :ivar counters: its :class:`~pynamodb_counters.CounterField` attributes by Python name.
    :ivar relations: every relation counting its instances in their writes' transactions (``counting=
      "transaction"``), inherited ones included, in declaration order: the write path's.
    :ivar streamed: every relation counting its instances from the table's stream (``counting="stream"``), in
      declaration order: :func:`~pynamodb_counters.streams.count_stream`'s.
    :ivar declared: both, in declaration order: what audits and repairs count.
    :ivar loads_otherwise: the attributes whose value on an instance may load otherwise once stored (those with a
      ``default``, which an absent or NULL attribute loads as, and sets, an empty one being stored as absent).
    :ivar shards: how many shard slots its items need: the largest ``shards=`` of its counters (``1`` when none
      is sharded).
    :ivar keys: its hash key attribute, then its range key attribute if it has one.
    :ivar discriminator: its ``DiscriminatorAttribute`` in a polymorphic single-table model, else ``None``.
    :ivar counted: whether the library writes its items: it has counters, or relations counting it in its
      writes' transactions (a child counted from the stream alone is written as plain PynamoDB writes it).
    :ivar key_names: the Python names of its hash key, then of its range key if it has one.
    :ivar string_keys: whether its key attributes are plain ``UnicodeAttribute``: a non-empty string is then its
      own serialized value.
    :ivar counting: :attr:`relations` compiled, in the same order (set once the spec is held: a relation's parent
      may be the model itself).
    :ivar stream_counting: :attr:`streamed` compiled, likewise.
    :ivar requests: a memo of the requests built for this model's items: as parents (``_actions.parent_request``),
      each shape of counter Update built (which deltas, which feeds, which guard), as a request to copy with another
      key, with the update it was built for; as children (``_actions.put_request``), the create-only Put of a table,
      to copy with another child's serialized item. Requests depend on nothing but the declarations and the shape,
      so they are kept with the declarations.
    """

    counters: Dict[str, CounterField]
    relations: Tuple[Relation, ...]
    loads_otherwise: Tuple[str, ...] = ()
    shards: int = 1
    keys: Tuple[Attribute[Any], ...] = ()
    discriminator: Any = None  # a DiscriminatorAttribute, typed Any: a descriptor's annotation types its value
    requests: Dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    key_names: Tuple[str, ...] = ()
    string_keys: bool = False
    counting: Tuple[RelationSpec, ...] = field(default=(), compare=False, repr=False)
    streamed: Tuple[Relation, ...] = ()
    stream_counting: Tuple[RelationSpec, ...] = field(default=(), compare=False, repr=False)
    declared: Tuple[Relation, ...] = ()
    counted: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counted", bool(self.relations or self.counters))
        if not self.declared:
            object.__setattr__(self, "declared", self.relations + self.streamed)


@dataclass(frozen=True, eq=False)
class RelationSpec:
    """A relation compiled, once, into what a counted write reads of it (``write._deltas`` runs its functions).

    :ivar relation: the declaration (errors name it).
    :ivar parent_model: the model that declares the counter.
    :ivar parent_spec: its spec.
    :ivar attribute: the counter's Python name on the parent.
    :ivar feeder_entry: the entry a counted write records in the parent's feeder set (``_cfeed``), for :attr:`tables`
      (the parent's and the child's table names it was compiled with: a table renamed at run time asks the
      declaration again).
    :ivar shards: the counter's shards.
    :ivar functions: the key function, ``when=`` and ``amount=``, as :attr:`Relation.functions
      <pynamodb_counters.Relation.functions>`.
    :ivar rule: the counting rule they make (``_counting_rule``), the relation's own: what a counted write and an
      audit count a child as.
    :ivar reads: the child attributes declared with ``reads=``.
    :ivar create_parent: whether the parent is created by its first count.
    :ivar parent_defaults: the function giving a created parent's defaults, or ``None``.
    :ivar expiries: how the expiries of its children are counted (``"stream"``, ``"ignored"`` or ``None``).
    """

    relation: Relation
    parent_model: Type[Any]
    parent_spec: ModelSpec
    attribute: str
    feeder_entry: str
    tables: Tuple[str, str]
    shards: int
    functions: Tuple[Any, ...]
    reads: FrozenSet[str]
    create_parent: bool
    parent_defaults: Optional[Callable[[Any], Any]]
    expiries: Optional[str]
    rule: CountingRule

    def __str__(self) -> str:
        return str(self.relation)


def compile_relation(relation: Relation) -> RelationSpec:
    """``relation`` as the write path reads it (see :class:`RelationSpec`), its parent's spec built if need be."""
    parent, counter = relation.parent_model, relation.counter
    assert counter.name is not None
    return RelationSpec(relation, parent, spec_of(parent), counter.name, relation.feeder_entry,
                        (parent.Meta.table_name, relation.child_model.Meta.table_name), counter.shards,
                        relation.functions, relation.reads, relation.create_parent, relation._parent_defaults,
                        relation.expiries, relation._compile_counting())


_UNCOUNTED = ModelSpec({}, ())


def spec_of(model: type) -> ModelSpec:
    """``model``'s spec, built on first use and then held on the class (a model without the mixin has none:
    it counts nothing).

    :raises ConfigurationError: a relation's ``reads=`` names attributes the model does not have, or a relation
      assigned after a class body cannot be registered (see :meth:`Relation.__set_name__`).
    """
    spec: Optional[ModelSpec] = model.__dict__.get(SPEC_HELD)  # its own, never a base's: a subclass may add relations
    if spec is None or (UNREGISTERED and undeclared_in(model)):  # a set's truth test: no call while it is empty
        if not issubclass(model, CountedBase):
            return _UNCOUNTED
        with REGISTERING:
            building = _BUILDING.get(model)
            if building is not None:  # a relation's parent being compiled: the model itself, or its child's
                return building
            spec = _BUILDING[model] = _build(model)
            try:
                object.__setattr__(spec, "counting", tuple(compile_relation(relation) for relation in spec.relations))
                object.__setattr__(spec, "stream_counting",
                                   tuple(compile_relation(relation) for relation in spec.streamed))
            finally:
                del _BUILDING[model]
            setattr(model, SPEC_HELD, spec)  # complete: no thread reads a spec before its relations are compiled
    return spec


_BUILDING: Dict[type, ModelSpec] = {}
"""The specs whose relations are being compiled (under ``REGISTERING``), for a parent that is the model itself or
counts the model in turn."""


def _build(model: Any) -> ModelSpec:
    attributes = model.get_attributes()
    counters = {name: attr for name, attr in attributes.items() if isinstance(attr, CounterField)}
    relations: List[Relation] = []
    for klass in reversed(model.__mro__):  # base classes first: declaration order
        declare_found(klass)
        relations.extend(value for value in vars(klass).values()
                         if isinstance(value, Relation) and value not in relations)
    for relation in relations:
        check_feeder_ids(relation.counter)  # relations declared apart may have come to share an id since
        unknown = relation.reads - set(attributes)
        if unknown:
            raise ConfigurationError(f"{relation}: reads={sorted(unknown)} are not attributes of {model.__name__}")
    loads_otherwise = tuple(name for name, attribute in attributes.items()
                    if attribute.default is not None or attribute.attr_type in _SET_TYPES)
    shards = max((counter.shards for counter in counters.values()), default=1)
    keys = tuple(key_attributes(model)) if model._hash_keyname is not None else ()  # PynamoDB allows a keyless one
    key_names = tuple(name for name in (model._hash_keyname, model._range_keyname) if name)
    string_keys = bool(keys) and all(type(attribute) is UnicodeAttribute for attribute in keys)
    return ModelSpec(counters, tuple(r for r in relations if r.counting != STREAM), loads_otherwise, shards, keys,
                     discriminator_of(model), key_names=key_names, string_keys=string_keys,
                     streamed=tuple(r for r in relations if r.counting == STREAM), declared=tuple(relations))


def counters_of(model: type) -> Dict[str, CounterField]:
    """``model``'s counter attributes by Python name."""
    return spec_of(model).counters


def relations_of(model: type) -> Tuple[Relation, ...]:
    """Every relation that counts ``model``'s instances, inherited ones included, in declaration order: in their
    writes' transactions or from the stream."""
    return spec_of(model).declared


def shard_count(model: type) -> int:
    """How many shard slots ``model``'s items need: the largest ``shards`` of its counters (``1`` when none is
    sharded)."""
    return spec_of(model).shards


def feeders_of(counter: CounterField) -> Tuple[Relation, ...]:
    """Every relation declared so far that counts into ``counter``, those assigned after a class body included.

    :raises ConfigurationError: one of those cannot be registered.
    """
    declare_feeders(counter)
    return tuple(counter._feeders)


def check_feeder_ids(counter: CounterField) -> None:
    """Refuse two loaded relations that feed ``counter`` under one feeder id, unless they count the same items
    (one class defined twice).

    :raises ConfigurationError: an audit could not tell their parents apart: one of them needs ``feeder=``.
    """
    seen: Dict[str, Relation] = {}
    for relation in feeders_of(counter):
        other = seen.setdefault(feeder_id(relation), relation)
        if other is not relation and not same_class(other.child_model, relation.child_model):
            raise feeder_clash(relation, relation.child_model, relation.name, other)


def all_relations() -> List[List[Relation]]:
    """Every relation of the counted models loaded, grouped by counter."""
    groups: Dict[int, List[Relation]] = {}
    for model in counted_classes():
        for value in vars(model).values():
            if isinstance(value, Relation) and value.name != "?":
                counter = value.counter
                groups.setdefault(id(counter), list(feeders_of(counter)))
    return list(groups.values())


# -- relations assigned after a class body, registered at first use -------------------------------------------
def declare_found(klass: type) -> None:
    """Register each relation that ``klass``'s own namespace holds but no class body declared (one assigned after
    the body).

    :raises ConfigurationError: one cannot be registered, or one relation is held under a second name.
    """
    for name, value in list(vars(klass).items()):
        if not isinstance(value, Relation):
            continue
        if value.declared_on is None:
            value.register(klass, name)
        elif value.declared_on is not klass or value.name != name:
            raise ConfigurationError(f"one relation cannot be declared twice ({value} and {klass.__name__}.{name})")


def undeclared_in(model: type) -> bool:
    """Whether ``model`` or a base of it holds a relation assigned after its class body and not registered yet
    (looked for only while some relation is unregistered)."""
    if not UNREGISTERED:
        return False
    return any(isinstance(value, Relation) and weakref.ref(value) in UNREGISTERED for klass in model.__mro__
               for value in vars(klass).values())


def declare_feeders(counter: CounterField) -> None:
    """Register each relation feeding ``counter`` that was assigned after a class body and is not registered yet.

    :raises ConfigurationError: one cannot be registered.
    """
    if not UNREGISTERED:
        return
    with REGISTERING:
        pending = [relation for relation in (ref() for ref in list(UNREGISTERED))
                   if relation is not None and relation.counter is counter]
    for relation in pending:
        for klass in counted_classes():
            if made(klass):
                for name, value in list(vars(klass).items()):
                    if value is relation:
                        relation.register(klass, name)


_FOREIGN = "_pynamodb_counters_foreign"  # on a model class: (relations declared, table, its foreign feeds)


def foreign_feeders(model: type) -> Dict[str, Relation]:
    """The feeder entries (``_cfeed``) that mark an item of ``model``'s table as another model's, with the relation
    that records each: the entries of the relations counting into models stored in the same table, outside
    ``model``'s class hierarchy. Empty where ``model`` has a discriminator (its guard tells items apart) or
    shares its table with no other parent model."""
    held = model.__dict__.get(_FOREIGN)
    table = model.Meta.table_name  # type: ignore[attr-defined]
    if held is not None and held[0] == declared() and held[1] == table:
        found: Dict[str, Relation] = held[2]
        return found
    found = {}
    if getattr(model, "_discriminator", None) is None:
        relations = [relation for group in all_relations() for relation in group]
        own = {entry for relation in relations if _same_model(relation.parent_model, model)
               for entry in _entries(relation)}
        for relation in relations:
            other = relation.parent_model
            if other.Meta.table_name == table and not _same_model(other, model):
                found.update((entry, relation) for entry in _entries(relation) if entry not in own)
    setattr(model, _FOREIGN, (declared(), table, found))
    return found


def _entries(relation: Relation) -> Tuple[str, str]:
    """The feeder entries a counted write through ``relation`` records, or recorded before feeder ids named what
    the audit counts (``module:Child.relation``)."""
    entry = relation.feeder_entry
    return entry, f"{entry.partition(FEEDER_SEPARATOR)[0]}{FEEDER_SEPARATOR}{legacy_feeder_id(relation)}"


def _same_model(one: type, other: type) -> bool:
    """Whether two models store the same items: one is the other's subclass or base, or they are one class
    defined twice (a module imported again, a factory called again)."""
    return issubclass(one, other) or issubclass(other, one) or same_class(one, other)


# -- which model an item is -----------------------------------------------------------------------------------------
_IDENTITIES: weakref.WeakKeyDictionary[type, Tuple[Tuple[Any, ...], Identity]] = weakref.WeakKeyDictionary()
_IDENTITIES_LOCK = threading.Lock()


def identity_of(model: type) -> Identity:
    """What every item of ``model`` holds (``_identity``), compiled on first use and held while no relation is
    declared, its table is not renamed and no subclass of its polymorphic model is registered."""
    discriminator = discriminator_of(model)
    stamp = (declared(), model.Meta.table_name,  # type: ignore[attr-defined]
             len(discriminator._class_map) if discriminator is not None else 0)
    held = _IDENTITIES.get(model)
    if held is not None and held[0] == stamp:
        return held[1]
    prefixes = [relation.prefix for relation in relations_of(model) if relation.prefix is not None]
    identity = compile_identity(model, model.get_attributes(), prefixes, discriminator)  # type: ignore[attr-defined]
    with _IDENTITIES_LOCK:
        _IDENTITIES[model] = (stamp, identity)
    return identity


_TOLD_APART: Dict[Tuple[Any, ...], int] = {}
"""The sets of models (by id) found told apart, each with the number of relations declared then."""


def check_told_apart(models: Sequence[type], caller: str, children_only: bool = False) -> None:
    """Refuse ``models``, given together to ``caller`` (a stream handler), where one's items cannot be told from
    another model's of its table: one of ``models``, or any model loaded with items in that table (``_identity``);
    with ``children_only``, any counted child among them (``count_expiries`` takes off only items a counted write
    stored, which hold its write id: never a parent's). Checked once per set of models while no relation is
    declared.

    :raises ConfigurationError: naming both models, what tells each one's items, and how to tell them apart.
      Nothing was written.
    """
    key = (children_only,) + tuple(id(model) for model in models)
    if _TOLD_APART.get(key) == declared():
        return
    for model in models:
        mine = identity_of(model)
        others = dict.fromkeys(other for other in models if other.Meta.table_name == mine.table)  # type: ignore
        others.update(dict.fromkeys(other for other in models_in(mine.table)
                                    if not children_only or relations_of(other)))
        for other in others:
            if related(model, other):
                continue
            theirs = identity_of(other)
            if confusion(mine, theirs):
                raise ConfigurationError(confused(caller, model, mine, other, theirs))
    _TOLD_APART[key] = declared()
