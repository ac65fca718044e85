"""
Which model an item is, wherever the library meets an item it did not load through its model: a stream record's
images (the handlers), a child an audit's Query reads, an export's line. One rule, from what each model declares,
compiled once per model into an :class:`Identity`. Every item of a model holds:

* its key attributes, of their types;
* where any of its relations declares ``prefix=``, a sort key that starts with one of those prefixes: ``prefix=``
  says where a relation's children are, and all of a model's items share its sort-key shape;
* in a polymorphic model, its discriminator, naming the model or one of its subclasses;
* each attribute it declares non-null without a default, not NULL: PynamoDB saves no item without them. (An
  attribute added to a model later is declared ``null=True`` or with a default, as PynamoDB advises: the items
  stored before it lack it.)

An item that holds all of it *fits* the model (:meth:`Identity.fits`); the part a filter can check (the
discriminator and the non-null attributes: the key and the prefix are the Query's own) is also a PynamoDB
condition (:attr:`Identity.condition`), evaluated on raw items by the same matcher (``_item_conditions``).

Two models of one table are told apart where one's items can never fit the other (:meth:`Identity.excludes`): a
key or non-null attribute the other does not declare, or declares of another type; prefixes neither of which
starts the other; discriminators naming other classes. A model counted from the stream must be told apart from
every other model of its table (:func:`check_told_apart`): refused at its declaration where it cannot be told from
its parent, and at a handler's first call where it cannot be told from a model loaded in its table or given with
it. A model whose relations declare ``prefix=`` claims the items under it, also from a model that declares none (a
parent, whose sort keys are its own: ``"META"``).

Declarations only, no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any, Callable, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from pynamodb.attributes import Attribute, DiscriminatorAttribute
from pynamodb.constants import NULL
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path
from pynamodb.models import Model

from ..exceptions import ConfigurationError
from ._counted import same_class, subclasses_of
from ._item_conditions import matcher

__all__ = ["Identity", "compile_identity", "confused", "confusion", "models_in", "related",
           "told_apart_when_declared"]


@dataclass(frozen=True, eq=False)
class Identity:
    """What every item of :attr:`model` holds, by its declarations.

    :ivar model: the model.
    :ivar table: its table.
    :ivar keys: its key attributes' stored names and types (``("pk", "S")``), hash key first.
    :ivar prefixes: the prefixes its relations declare: its sort keys start with one of them (none: any sort key).
    :ivar required: the stored names of the attributes it declares non-null without a default (not its keys).
    :ivar declared: every attribute it declares, by stored name, with its type: what its items may hold.
    :ivar discriminator: its discriminator's stored name and the values naming it or a subclass, in a polymorphic
      model.
    :ivar condition: the discriminator and the non-null attributes as a PynamoDB condition (``None``: neither).
    """

    model: type
    table: str
    keys: Tuple[Tuple[str, str], ...]
    prefixes: Tuple[str, ...]
    required: Tuple[str, ...]
    declared: Mapping[str, str]
    discriminator: Optional[Tuple[str, FrozenSet[str]]]
    condition: Optional[Condition]
    _matches: Optional[Callable[[Mapping[str, Any]], bool]]

    def fits(self, item: Mapping[str, Any]) -> bool:
        """Whether the raw ``item`` (``{"pk": {"S": ...}, ...}``) holds what every item of the model holds."""
        for name, kind in self.keys:
            value = item.get(name)
            if not value or kind not in value:
                return False
        if self.prefixes:
            sort = item[self.keys[-1][0]].get("S")
            if not isinstance(sort, str) or not sort.startswith(self.prefixes):
                return False
        return self._matches is None or self._matches(item)

    def excludes(self, other: Identity) -> bool:
        """Whether no item of ``other``'s model, as its declarations write it, fits this model."""
        theirs = other.declared
        for name, kind in self.keys:
            if theirs.get(name) != kind:
                return True
        if any(name not in theirs for name in self.required):
            return True
        if self.prefixes and other.prefixes and not _overlap(self.prefixes, other.prefixes):
            return True
        if self.discriminator is not None:
            name, values = self.discriminator
            if name not in theirs or (other.discriminator is not None and other.discriminator[0] == name
                                      and not values & other.discriminator[1]):
                return True
        return False

    def describe(self) -> str:
        """What tells its items, for errors: ``sort keys starting with 'LIKE#', thread_id``."""
        parts = [f"sort keys starting with {' or '.join(map(repr, self.prefixes))}"] if self.prefixes else []
        if self.discriminator is not None:
            parts.append(f"{self.discriminator[0]} in {sorted(self.discriminator[1])}")
        parts.extend(f"a non-null {name}" for name in self.required)
        return ", ".join(parts) or "nothing but its key attributes"


def _overlap(ours: Sequence[str], theirs: Sequence[str]) -> bool:
    return any(one.startswith(other) or other.startswith(one) for one in ours for other in theirs)


# -- compiled once per model ------------------------------------------------------------------------------------------
def compile_identity(model: type, attributes: Mapping[str, Attribute[Any]], prefixes: Iterable[str],
                     discriminator: Optional[DiscriminatorAttribute]) -> Identity:
    """The identity of ``model`` from its attributes (by Python name; read from its namespace for a class whose
    body is being run), its relations' prefixes and its discriminator (``_spec.identity_of`` holds it)."""
    prefixes = tuple(dict.fromkeys(prefixes))
    stored = {name: attribute.attr_name or name for name, attribute in attributes.items()}
    keys = tuple((stored[name], attribute.attr_type) for name, attribute in
                 sorted(((n, a) for n, a in attributes.items() if a.is_hash_key or a.is_range_key),
                        key=lambda pair: not pair[1].is_hash_key))
    required = tuple(sorted(stored[name] for name, attribute in attributes.items() if _required(attribute)))
    conditions: List[Condition] = []
    values: Optional[Tuple[str, FrozenSet[str]]] = None
    if discriminator is not None:
        classes: List[type] = discriminator.get_registered_subclasses(model)
        named = frozenset(str(discriminator.get_discriminator(cls)) for cls in classes)
        if classes:
            values = (discriminator.attr_name, named)
            conditions.append(discriminator.is_in(*classes))
    for name in required:
        conditions.append(Path([name]).exists() & ~Path([name]).is_type(NULL))
    condition = reduce(lambda one, other: one & other, conditions) if conditions else None
    table: str = model.Meta.table_name  # type: ignore[attr-defined]
    return Identity(model, table, keys, prefixes, required,
                    {stored[name]: attribute.attr_type for name, attribute in attributes.items()}, values, condition,
                    None if condition is None else matcher(condition, f"what tells {model.__name__}'s items"))


def _required(attribute: Attribute[Any]) -> bool:
    """Whether every item of its model holds ``attribute``: non-null, without a default, not a key."""
    return not (attribute.null or attribute.is_hash_key or attribute.is_range_key
                or attribute.default is not None or getattr(attribute, "default_for_new", None) is not None
                or isinstance(attribute, DiscriminatorAttribute))


# -- told apart -------------------------------------------------------------------------------------------------------
def confusion(mine: Identity, other: Identity) -> bool:
    """Whether items of ``other``'s model may be taken for ``mine``'s: nothing excludes them, and ``mine`` claims no
    prefix that ``other``'s sort keys (any, where it declares none) would have to be under."""
    return not mine.excludes(other) and not (mine.prefixes and not other.prefixes)


def models_in(table: str) -> Iterator[type]:
    """Every PynamoDB model class loaded whose items are in ``table``, each once."""
    for klass in subclasses_of(Model):
        meta = getattr(klass, "Meta", None)
        if getattr(meta, "table_name", None) == table and "_attributes" in vars(klass) \
                and getattr(klass, "_hash_keyname", None):
            yield klass


def related(one: type, other: type) -> bool:
    """Whether two models store the same items: one is the other's subclass or base, or one class defined twice."""
    return issubclass(one, other) or issubclass(other, one) or same_class(one, other)


def told_apart_when_declared(owner: type, parent: Identity, where: str, attributes: Mapping[str, Attribute[Any]],
                             prefixes: Iterable[str]) -> None:
    """Refuse a relation counted from the stream, declared as ``where`` on ``owner`` (a class whose body is run:
    its ``attributes`` and its relations' ``prefixes`` read from its namespace), whose items nothing tells from
    those of its parent (``parent``, its identity, in the same table: not a model of ``owner``'s items).

    :raises ConfigurationError: naming both models and how to tell them apart.
    """
    model = parent.model
    found = next(((name, a) for name, a in attributes.items() if isinstance(a, DiscriminatorAttribute)), None)
    if found is not None and (found[1].attr_name or found[0]) in parent.declared:
        return  # one polymorphic table: each class is named by a value of its own
    mine = compile_identity(owner, attributes, prefixes, None)
    if confusion(mine, parent):
        raise ConfigurationError(confused(where, owner, mine, model, parent, declaring=True))


def confused(caller: str, model: type, mine: Identity, other: type, theirs: Identity, declaring: bool = False
             ) -> str:
    """Why ``model``'s items (``mine``) cannot be told from ``other``'s (``theirs``), and what tells them apart:
    for ``caller``, a handler given the model (or, ``declaring``, its relation being declared)."""
    what = f"{model.__name__} and {other.__name__} share table {mine.table}, and nothing {model.__name__} declares " \
           f"tells its items from {other.__name__}'s ({model.__name__}: {mine.describe()}; {other.__name__}: " \
           f"{theirs.describe()})"
    if declaring:
        effect = f"count_stream would count {other.__name__}'s own records as {model.__name__}s."
    else:
        effect = f"the handler would count {other.__name__} items as {model.__name__}s. Nothing was written."
    return (f"{caller}: {what}: {effect}\n"
            f"Tell them apart: declare counted_by(..., prefix=...) on {model.__name__}'s relations (every "
            f"{model.__name__} sort key starts with it, such as 'LIKE#'), give {model.__name__} a non-null attribute "
            f"without a default that {other.__name__} does not declare, or put one DiscriminatorAttribute on a common "
            f"base of both models.")
