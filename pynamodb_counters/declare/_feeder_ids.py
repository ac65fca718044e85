"""
A relation's feeder id: its name in a parent's feeder set (``_cfeed``), the same in every process and through
refactors, and the checks that two relations feeding one counter never share one.

Declarations only, no I/O.
"""
from __future__ import annotations

from typing import Any, Optional

from .._keys import discriminator_of
from ..exceptions import ConfigurationError
from ._counted import same_class
from ._stored_names import FEEDER_SEPARATOR

__all__ = ["check_feeder_id", "feeder_clash", "feeder_entry", "feeder_id", "legacy_feeder_id"]

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
