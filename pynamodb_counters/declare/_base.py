"""
What every counted model shares, below any declaration: the base that marks a model as counted, and the
attributes the library itself stores on items.

Declarations only, no I/O. :class:`CountedBase` is :class:`~pynamodb_counters.CounterMixin`'s base: declarations
check a model's MRO for it, and every counted model class is one of its subclasses (which is how the library
finds every relation loaded, without a registry of its own).
"""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Type

from pynamodb.attributes import Attribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.models import Model

from .._keys import discriminator_of
from ..exceptions import ConfigurationError

__all__ = ["EDITED_BY", "EDIT_ID", "FEEDERS", "FEEDER_SEPARATOR", "MARKER", "MAX_SHARDS", "SEQUENCE",
           "SHARD", "SHARD_COUNT", "SPEC_HELD", "STORED_NAMES", "WRITE_ID", "CountedBase", "check_feeder_id",
           "counted_classes", "declared", "feeder_entry", "feeder_clash", "feeder_id", "forget_specs",
           "legacy_feeder_id", "note_declared", "require_mixin", "same_class"]

MAX_SHARDS = 100
"""The most shards a counter may have: one BatchGetItem (at most 100 keys) reads them all, and one transaction
(at most 100 actions) creates them with their parent."""

WRITE_ID = "_cwid"
"""The attribute each counted child item carries: the token of the transaction that created it. A retry whose
response was lost recognises its own committed write by it, even where the server forgets or ignores tokens."""

EDIT_ID = "_ceid"
"""The attribute a counted edit or update of a child sets: the token of the transaction that last edited it. A
retried edit whose response was lost recognises its own committed write by it; the child's :data:`WRITE_ID`
stays the create's, so that a retry of the create is still recognised after an edit."""

EDITED_BY: Attribute[str] = UnicodeAttribute(attr_name=EDIT_ID)
""":data:`EDIT_ID` as an attribute, for the Update of a counted edit."""

SEQUENCE: Attribute[float] = NumberAttribute(attr_name="_cseq")
"""The counted-write sequence each parent item carries: every counted write that touches the item adds 1, as
does every repair. A repair conditions on it, so no counted write can land unseen between an audit's count
and the repair, not even a like and an unlike that leave the counter where it was."""

FEEDERS: Attribute[Any] = UnicodeSetAttribute(attr_name="_cfeed")
"""The relations that have fed each counter of a parent item (or shard item): every counted write adds, in the
same Update, one entry per counter it changes and relation feeding it, ``"<counter attribute name><<feeder id>"``
(``like_tally<prefix=LIKE#``, see :func:`feeder_id`). An audit that cannot see one of them reports the parent as
unverifiable instead of counting too few children."""

FEEDER_SEPARATOR = "<"
"""Between the counter's attribute name and the feeder id in a :data:`FEEDERS` entry."""

SHARD: Attribute[float] = NumberAttribute(attr_name="_cshard")
"""Marks a shard item and holds its index (``1`` and up). Scans of a parent model's table skip these items with
:func:`~pynamodb_counters.not_a_shard`."""

SHARD_COUNT: Attribute[float] = NumberAttribute(attr_name="_cshards")
"""On a parent item: how many shards (the parent included) have been created for it."""

MARKER = "_cexpiry"
"""The attribute that makes an item an expiry marker (it holds the expired child's table), and the start of a
marker's hash key (``_cexpiry#<eventID>``): see ``_expiry_rules``."""

STORED_NAMES = (WRITE_ID, EDIT_ID, SEQUENCE.attr_name, FEEDERS.attr_name, SHARD.attr_name, SHARD_COUNT.attr_name,
                MARKER)
"""Every attribute name the library stores on items, from the definitions above: a counted model's own attribute
stored under one of them is refused when its class is made."""


class CountedBase:
    """The base of :class:`~pynamodb_counters.CounterMixin`: a model whose writes go through counting."""

    _pynamodb_counters_mixin = True


_DECLARED = 0
"""How many relations have been declared in this process so far: what is derived from every relation loaded
(another model's feeds in a shared table) is held until it changes."""


def declared() -> int:
    """How many relations have been declared in this process so far."""
    return _DECLARED


def note_declared() -> None:
    """Count one more relation declared."""
    global _DECLARED
    _DECLARED += 1


def counted_classes() -> Iterator[Type[Any]]:
    """Every class deriving from :class:`CountedBase` that is still alive, each once."""
    seen = set()
    pending: List[Type[Any]] = list(CountedBase.__subclasses__())
    while pending:
        klass = pending.pop()
        if klass in seen:
            continue
        seen.add(klass)
        pending.extend(klass.__subclasses__())
        yield klass


SPEC_HELD = "_pynamodb_counters_spec"
"""The attribute, in a counted model class's own namespace, holding its spec: what the library read of its
declarations, built on first use (see ``_spec``)."""


def forget_specs(model: type) -> None:
    """Drop the spec held by ``model`` and by each of its subclasses, to be built again on next use: a relation
    registered after the class body (``Category.parent = counted_by(...)``) is in none of them, a counter
    redeclared is in none of them as it is now. The specs of every other counted model go too: a child's holds
    its relations compiled, each with its parent's spec."""
    for klass in counted_classes():
        if SPEC_HELD in klass.__dict__:
            delattr(klass, SPEC_HELD)


def same_class(one: type, other: type) -> bool:
    """Whether two classes are one class defined twice (its module imported again, a factory called twice): the
    same ``__module__`` and ``__qualname__``, the same items."""
    return one.__module__ == other.__module__ and one.__qualname__ == other.__qualname__


def feeder_id(relation: Any, child: Optional[type] = None, name: Optional[str] = None) -> str:
    """A :class:`~pynamodb_counters.Relation`'s name in the feeder record: the same in every process and through
    refactors (a module renamed, models declared in a factory or in ``__main__``), and distinct for relations
    feeding one counter unless they count the same items.

    * ``name=<feeder>`` for ``counted_by(..., feeder="...")``: the caller's stable name;
    * else what the audit counts: ``prefix=<prefix>`` for ``counted_by(..., prefix=...)``, preceded by
      ``discriminator=<value>;`` when the declaring class has one (siblings of a polymorphic model may share a
      prefix), or ``relation=<ChildClass>.<relation>`` (the class's ``__name__``, never its module);
    * either preceded by ``table=<child table>;`` when the child's table is not the parent's own (so a table
      holding parents and children keeps its records when it is restored or renamed).

    Read once the child class is built (its discriminator is registered after its body runs); ``child`` and
    ``name`` give the class and attribute of a relation being registered (from its class body).
    """
    if relation.feeder is not None:
        return f"name={relation.feeder}"
    model: Any = relation.child_model if child is None else child
    parent, name = relation.parent_model, relation.name if name is None else name
    parts = [] if model.Meta.table_name == parent.Meta.table_name else [f"table={model.Meta.table_name}"]
    if relation.prefix is None:
        return ";".join(parts + [f"relation={model.__name__}.{name}"])
    attribute = discriminator_of(model)
    value = attribute.get_discriminator(model) if attribute is not None else None
    if value is not None:
        parts.append(f"discriminator={value}")
    return ";".join(parts + [f"prefix={relation.prefix}"])


def feeder_clash(relation: Any, child: type, name: str, other: Any) -> ConfigurationError:
    """The error for ``child.name`` (the relation ``relation``) feeding a counter under the feeder id of ``other``,
    a relation of another class feeding it too."""
    theirs = other.child_model
    return ConfigurationError(
        f"{child.__module__}.{child.__name__}.{name} and {theirs.__module__}.{theirs.__name__}.{other.name} feed "
        f"{relation.counter!r} under one feeder id {feeder_id(other)!r}\n"
        f"An audit could not tell which of them fed a parent, and once one left the code it would repair the "
        f"counter without the other's children. Give one of them a stable name of its own: "
        f"counted_by(..., feeder='...').")


def check_feeder_id(relation: Any, owner: type, name: str) -> None:
    """Refuse ``owner.name``, the relation ``relation`` being registered, when another class's relation already
    feeds its counter under the feeder id it would record. A ``prefix=`` relation's id is read once its class is
    built (it may name a discriminator), and checked at its model's first use (``_spec``).

    :raises ConfigurationError: the ids clash.
    """
    if relation.prefix is not None and relation.feeder is None:
        return
    mine = feeder_id(relation, owner, name)
    for other in relation.counter._feeders:
        if (other.feeder is not None or other.prefix is None) and feeder_id(other) == mine \
                and not same_class(other.child_model, owner):
            raise feeder_clash(relation, owner, name, other)


def legacy_feeder_id(relation: Any) -> str:
    """The feeder id the library recorded before :func:`feeder_id` (``module:ChildModel.relation``): an audit
    still recognises it as ``relation``'s, and :func:`~pynamodb_counters.migrate_feeders` rewrites it."""
    child = relation.child_model
    return f"{child.__module__}:{child.__qualname__}.{relation.name}"


def feeder_entry(relation: Any) -> str:
    """The entry a counted write adds to :data:`FEEDERS` for ``relation``: ``<counter attr><<feeder id>``
    (``like_tally<prefix=LIKE#``)."""
    return f"{relation.counter.attr_name}{FEEDER_SEPARATOR}{feeder_id(relation)}"


def require_mixin(owner: type, what: str) -> None:
    """Refuse a counter or relation on a class whose writes would not go through counting.

    :raises ConfigurationError: ``owner`` lacks :class:`~pynamodb_counters.CounterMixin`, or lists it after
      PynamoDB's ``Model``.
    """
    mro = owner.__mro__
    if CountedBase not in mro or (Model in mro and mro.index(Model) < mro.index(CountedBase)):
        raise ConfigurationError(f"{what}: {owner.__name__} must list CounterMixin before Model in its bases\n"
                                 f"As in class {owner.__name__}(CounterMixin, Model); otherwise its writes would "
                                 f"not be counted.")
