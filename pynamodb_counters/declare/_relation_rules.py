"""
The rules a :func:`~pynamodb_counters.counted_by` declaration must pass, refused with
:exc:`~pynamodb_counters.exceptions.ConfigurationError` where it cannot work or would miscount: its options, when
``counted_by()`` is called (:func:`check_options`), and its place, when a class registers it
(:func:`check_declaration`): the mixin, a counter on a model, shards its key can carry, ``prefix=`` on a model
with a range key, how its expiries are counted, no twin relation counting each child twice, no neighbour counted
under an overlapping prefix. And what every counted class must hold when it is made (:func:`check_model`): no
attribute stored under a name the library stores itself, and the relations it inherits holding for it (a
``TTLAttribute`` a subclass adds). Declarations only, no I/O.

A relation is passed in, never imported: the rules sit below :mod:`pynamodb_counters.declare._relations`, which
calls them.
"""
from __future__ import annotations

from types import CodeType
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Type

from pynamodb.attributes import Attribute, DiscriminatorAttribute

from .._compat import holds
from ..exceptions import ChildValueError, ConfigurationError
from ._attributes import CounterField
from ._base import STORED_NAMES, counted_classes, require_mixin, same_class
from ._expiry_rules import check_expiries, check_inherited_expiries
from ._shards import check_shardable

__all__ = ["MAX_FEEDER", "check_declaration", "check_model", "check_options", "check_parent_defaults", "made"]

MAX_FEEDER = 100
"""The longest ``feeder=`` name: it is stored on every parent the relation feeds."""


def check_options(counter: Any, key: Any, reads: Iterable[str], prefix: Optional[str], children: Any, when: Any,
                  amount: Any, create_parent: Any, parent_defaults: Any, feeder: Any) -> None:
    """Refuse the options of a :func:`~pynamodb_counters.counted_by` call that cannot work.

    :raises ConfigurationError: naming the option and what it takes.
    """
    if not isinstance(counter, CounterField):
        raise ConfigurationError(
            f"counted_by() needs a parent's CounterField, such as Post.like_tally; got {counter!r}"
        )
    if not callable(key):
        raise ConfigurationError(f"counted_by(key=...) must be a callable mapping a child to its parent's key; "
                                 f"got {key!r}")
    if isinstance(reads, str):
        raise ConfigurationError("counted_by(reads=...) takes a sequence of attribute names, not a string")
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise ConfigurationError(f"counted_by(prefix=...) is a non-empty sort key prefix such as 'LIKE#', "
                                 f"not {prefix!r}\n"
                                 f"It says the children are the items of their parent's partition whose sort keys "
                                 f"start with it. Children stored elsewhere are counted for audits with "
                                 f"children=... (a function of the parent's key).")
    if children is not None and not callable(children):
        raise ConfigurationError(f"counted_by(children=...) must be a callable counting a parent's children, "
                                 f"not {children!r}")
    if prefix is not None and children is not None:
        raise ConfigurationError("counted_by() takes prefix= or children=, not both")
    if when is not None and not callable(when):
        raise ConfigurationError(f"counted_by(when=...) must be a callable saying whether a child counts, such "
                                 f"as lambda comment: comment.status == 'published'; got {when!r}")
    if amount is not None and not callable(amount):
        raise ConfigurationError(f"counted_by(amount=...) must be a callable giving the whole number a child "
                                 f"adds, such as lambda comment: comment.words; got {amount!r}")
    if counter.shards > 1 and counter.model is not None:  # else a counter of the body being run: at __set_name__
        check_shardable(counter.model, counter)
    if feeder is not None and not (isinstance(feeder, str) and feeder.strip() == feeder
                                   and 0 < len(feeder) <= MAX_FEEDER):
        raise ConfigurationError(f"counted_by(feeder=...) is a short stable name, not {feeder!r}\n"
                                 f"It names the relation in its parents' feeder records, such as 'reactions': 1 to "
                                 f"{MAX_FEEDER} characters, no surrounding spaces.")
    if not isinstance(create_parent, bool):
        raise ConfigurationError(f"counted_by(create_parent=...) is True or False, not {create_parent!r}")
    if parent_defaults is not None and not (create_parent and callable(parent_defaults)):
        raise ConfigurationError("counted_by(parent_defaults=...) is a function of the child giving the "
                                 "attributes a parent created by its first count starts with; it needs "
                                 "create_parent=True")
    if create_parent and counter.shards > 1:
        raise ConfigurationError(f"counted_by({counter!r}, create_parent=True): a parent created by its first "
                                 f"count cannot have a sharded counter (its shard items would not exist)")


def check_parent_defaults(relation: Any, defaults: Any) -> None:
    """Refuse what a relation's ``parent_defaults=`` returned for a child, unless it is a dict of the parent's
    attributes (not its counters, not its key) by name, each holding a value the attribute can hold.

    :raises ChildValueError: naming what is wrong; nothing was written.
    """
    model = relation.parent_model
    attributes = model.get_attributes()
    if not isinstance(defaults, dict) or not all(name in attributes and not isinstance(attributes[name],
                                                                                          CounterField)
                                                 for name in defaults):
        raise ChildValueError(f"{relation}: parent_defaults= returned {defaults!r}; it must return a dict of "
                              f"{model.__name__}'s attributes (not its counters) by name. Nothing "
                              f"was written")
    for name, value in defaults.items():
        if name in (model._hash_keyname, model._range_keyname):
            raise ChildValueError(f"{relation}: parent_defaults= names {model.__name__}.{name}, part of its key: "
                                  f"the key comes from key=, the defaults from the other attributes. Nothing "
                                  f"was written")
        if value is not None and not holds(attributes[name], value):
            raise ChildValueError(f"{relation}: parent_defaults= gave {name}={value!r}, which "
                                  f"{model.__name__}.{name} ({type(attributes[name]).__name__}) cannot hold. "
                                  f"Nothing was written")


def check_declaration(relation: Any, owner: Type[Any], name: str) -> None:
    """Refuse to declare the relation as ``owner.name`` where it would miscount. PynamoDB may not have processed
    ``owner`` yet (in its class body): its attributes are read from its namespace and its bases.

    :raises ConfigurationError: the relation is declared already, ``owner`` lacks the mixin, ``owner`` would
      miscount whatever it declares (:func:`check_model`), the counter is on no model, a sharded counter of
      ``owner`` has a key that cannot carry shards, ``prefix=`` on a model with no range key, ``owner`` or a
      subclass made already has a ``TTLAttribute`` and the relation does not say how its expiries are counted,
      another relation of ``owner`` already counts it the same way in the same counter, or another child model's
      items are under an overlapping prefix of the same table with nothing to tell them apart.
    """
    where = f"{owner.__name__}.{name} = counted_by(...)"
    if relation.declared_on is not None:
        raise ConfigurationError(f"one relation cannot be declared twice ({relation} and {owner.__name__}.{name})")
    require_mixin(owner, where)
    check_model(owner, type(relation))
    counter = relation.counter
    if counter.model is None:
        raise ConfigurationError(f"{where}: its CounterField is not declared on a model class\n"
                                 f"Declare the counter on the parent model first; a model counting its own kind "
                                 f"declares it in its class body, before the relation.")
    attributes = _declared_attributes(owner)
    if counter.shards > 1 and counter.model is owner:
        check_shardable(owner, counter, next((a for a in attributes.values() if a.is_hash_key), None))
    if relation.prefix is not None and not any(attribute.is_range_key for attribute in attributes.values()):
        raise ConfigurationError(
            f"{owner.__name__}.{name} = counted_by(..., prefix={relation.prefix!r}): {owner.__name__} has no range "
            f"key (sort key)\n"
            f"prefix= says the children are the items of their parent's partition whose sort keys start with it.\n"
            f"Give {owner.__name__} a range key (an attribute with range_key=True), or count its children for audits "
            f"with children=... instead.")
    check_expiries(owner, where, relation.expiries)
    for subclass in _made_subclasses(owner):  # a relation registered after them (assigned after the body)
        check_inherited_expiries(subclass, owner, where, _counter_of(relation), relation.expiries)
    _check_twins(relation, owner, name)
    if relation.prefix is not None:
        _check_neighbours(relation, owner, name, attributes)


def check_model(owner: Type[Any], kind: Type[Any]) -> None:
    """Refuse ``owner``, a counted class, where it would miscount: an attribute of it, its own or inherited, stored
    under a name the library stores on items itself (``_base.STORED_NAMES``, whatever its Python name), or a
    relation (an instance of ``kind``) it inherits that does not say how the expiries of its items are counted.
    Checked as the class is made (``CounterMixin.__init_subclass__``), and before the first relation of its body
    registers (:func:`check_declaration`), so a class refused registers none. Its attributes are read from its
    namespace and its bases' (PynamoDB has not processed it yet).

    :raises ConfigurationError: naming the attribute, or the inherited relation and where to declare what.
    """
    for name, attribute in _declared_attributes(owner).items():
        stored = attribute.attr_name or name  # as PynamoDB names it, before its __set_name__ in a body being run
        if stored in STORED_NAMES:
            raise ConfigurationError(
                f"{owner.__name__}.{name} is stored as {stored!r}, a name pynamodb-counters stores on "
                f"items itself\n"
                f"Counted writes, audits and count_expiries would take it for the library's own (a write id, a "
                f"sequence, feeder records, a shard, an expiry marker) and write over it.\n"
                f"Give the attribute another attr_name; the library stores {', '.join(STORED_NAMES)}.")
    for klass in owner.__mro__[1:]:
        for name, relation in vars(klass).items():
            if isinstance(relation, kind) and relation.declared_on is klass:
                check_inherited_expiries(owner, klass, f"{klass.__name__}.{name} = counted_by(...)",
                                         _counter_of(relation), relation.expiries)


def _made_subclasses(model: type) -> Iterator[type]:
    """Every subclass of ``model`` that PynamoDB has processed, each once."""
    seen = set()
    pending = list(model.__subclasses__())
    while pending:
        klass = pending.pop()
        if klass not in seen:
            seen.add(klass)
            pending.extend(klass.__subclasses__())
            if made(klass):
                yield klass


def _counter_of(relation: Any) -> str:
    """The counter a relation counts into, as ``Parent.counter``."""
    return f"{relation.parent_model.__name__}.{relation.attribute}"


def _check_twins(relation: Any, owner: Type[Any], name: str) -> None:
    """Refuse a second relation of ``owner`` (its own or inherited) counting each child in the same counter
    the same way (the same key, ``when=`` and ``amount=``): every write would count the child twice."""
    counter = relation.counter
    for klass in owner.__mro__:
        for other in vars(klass).values():
            if isinstance(other, type(relation)) and other is not relation and other.declared_on is klass \
                    and other.counter is counter and _same_functions(relation.functions, other.functions):
                raise ConfigurationError(
                    f"{owner.__name__}.{name} and {klass.__name__}.{other.name} both count each "
                    f"{owner.__name__} in {_counter_of(relation)} with the same key, when= and amount=\n"
                    f"Every save would add 2 for one child. Remove one of them. Two relations to one counter are for "
                    f"two parents of one child,\neach named by its own key (a transfer counted on its sender's and "
                    f"its recipient's transfer_count: key=lambda t: t.sender and key=lambda t: t.recipient).")

def _check_neighbours(relation: Any, owner: Type[Any], name: str, attributes: Dict[str, Attribute[Any]]
                      ) -> None:
    """Refuse ``prefix=`` where another child model's relation already counts the items of the same table under
    an overlapping prefix, in the partitions of the same parents, and nothing (one discriminator) tells the
    two models' items apart: an audit of either counter would count both."""
    prefix, table = relation.prefix, _table_of(owner)
    assert prefix is not None
    discriminator = _discriminator_of(attributes)
    for other in _registered_in(type(relation), table):
        model, other_prefix = other.child_model, other.prefix
        if other_prefix is None or not (prefix.startswith(other_prefix) or other_prefix.startswith(prefix)) \
                or model is owner or same_class(model, owner) \
                or not _same_partitions(relation.parent_model, other.parent_model):
            continue
        if discriminator is not None and discriminator is _discriminator_of(_declared_attributes(model)):
            continue
        raise ConfigurationError(
            f"{owner.__name__}.{name} = counted_by(..., prefix={prefix!r}) overlaps {model.__name__}.{other.name} = "
            f"counted_by(..., prefix={other_prefix!r})\n"
            f"{model.__name__}.{other.name} already counts {model.__name__} items of table {table} in the partitions "
            f"of the same parents,\nand nothing tells a {owner.__name__} item from a {model.__name__} item: an audit "
            f"of either counter would count both.\n"
            f"Give them distinct prefixes, neither starting with the other (such as 'LIKE#' and 'REACTION#'), put "
            f"one DiscriminatorAttribute on a common base of both models,\nor count them for audits with "
            f"children=... instead of prefix=.")


def _registered_in(kind: Type[Any], table: Optional[str]) -> Iterator[Any]:
    """Every relation (an instance of ``kind``) registered on a model of ``table``."""
    for klass in counted_classes():
        if _table_of(klass) == table and made(klass):
            for value in vars(klass).values():
                if isinstance(value, kind) and value.declared_on is klass:
                    yield value


def made(klass: type) -> bool:
    """Whether PynamoDB's metaclass has processed ``klass``: not a class whose body was refused, or is being run."""
    return "_attributes" in vars(klass)


def _declared_attributes(model: type) -> Dict[str, Attribute[Any]]:
    """``model``'s attributes by Python name, read from its namespace and its bases' (PynamoDB has not processed
    a class whose body is being run)."""
    found: Dict[str, Attribute[Any]] = {}
    for klass in reversed(model.__mro__):
        found.update((name, value) for name, value in vars(klass).items() if isinstance(value, Attribute))
    return found


def _discriminator_of(attributes: Dict[str, Attribute[Any]]) -> Optional[Attribute[Any]]:
    return next((value for value in attributes.values() if isinstance(value, DiscriminatorAttribute)), None)


def _table_of(model: type) -> Optional[str]:
    return getattr(getattr(model, "Meta", None), "table_name", None)


def _same_partitions(one: Any, other: Any) -> bool:
    """Whether two parent models' items may share partitions: one model (or a subclass, or the same class defined
    twice), or classes of one polymorphic table (a common discriminator)."""
    if one is other or issubclass(one, other) or issubclass(other, one) or same_class(one, other):
        return True
    discriminator = _discriminator_of(_declared_attributes(one))
    return discriminator is not None and discriminator is _discriminator_of(_declared_attributes(other))


def _same_functions(one: Sequence[Optional[Callable[..., Any]]], other: Sequence[Optional[Callable[..., Any]]]
                    ) -> bool:
    """Whether two relations' functions (key, ``when=``, ``amount=``) are the same, pair by pair."""
    return all(_same_function(mine, theirs) for mine, theirs in zip(one, other))


def _same_function(one: Optional[Callable[..., Any]], other: Optional[Callable[..., Any]]) -> bool:
    """Whether two user functions (or ``None``) are one, or the same code over the same values (a lambda written
    twice, a factory's function made twice with the same arguments)."""
    if one is other:
        return True
    code, other_code = getattr(one, "__code__", None), getattr(other, "__code__", None)
    if not isinstance(code, CodeType) or not isinstance(other_code, CodeType):
        return False
    return _code_shape(code) == _code_shape(other_code) \
        and getattr(one, "__globals__", None) is getattr(other, "__globals__", None) \
        and _same_values(_bound_values(one), _bound_values(other))


def _code_shape(code: CodeType) -> Any:
    """What a function's code does, without where it was written (lines, names of its arguments)."""
    constants = tuple(_code_shape(value) if isinstance(value, CodeType) else (type(value), value)
                      for value in code.co_consts)
    return code.co_code, code.co_names, code.co_argcount, code.co_kwonlyargcount, constants


_EMPTY = object()


def _bound_values(function: Any) -> List[Any]:
    """The values a function carries besides its code: its closure's cells and its defaults."""
    cells = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            cells.append(_EMPTY)
    defaults = getattr(function, "__defaults__", None) or ()
    keywords = sorted((getattr(function, "__kwdefaults__", None) or {}).items())
    return [*cells, *defaults, *keywords]


def _same_values(one: List[Any], other: List[Any]) -> bool:
    if len(one) != len(other):
        return False
    for value, other_value in zip(one, other):
        try:
            if value is not other_value and not bool(value == other_value):
                return False
        except Exception:  # a value without a plain equality (a PynamoDB attribute gives a condition): not the same
            return False
    return True
