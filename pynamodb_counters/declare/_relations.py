"""
``counted_by``: the declaration that a child model is counted in a parent's :class:`CounterField`, and the rules a
declaration must pass. Declarations only, no I/O.

A relation is declared once, in the child model's class body::

    class Like(CounterMixin, Model):
        ...
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"))

``Like.post`` is then the immutable :class:`Relation`; ``like.post`` is the parent key of one like (no I/O).

A model counting its own kind (a tree) names a counter declared earlier in the same body, or assigns the relation
after the body (``Category.parent = counted_by(Category.subcategories, ...)``): such a relation is registered at
first use (its model's first write, its counter's audit, a read of ``Category.parent``), with the same checks,
and never counts before.

The rules a :func:`~pynamodb_counters.counted_by` declaration must pass, refused with
:exc:`~pynamodb_counters.exceptions.ConfigurationError` where it cannot work or would miscount: its options, when
``counted_by()`` is called (:func:`check_options`), and its place, when a class registers it
(:func:`check_declaration`): the mixin, a counter on a model, shards its key can carry, ``prefix=`` on a model
with a range key, how its expiries are counted, no twin relation counting each child twice, no neighbour counted
under an overlapping prefix, a child counted from the stream told apart from its parent in their one table. And
what every counted class must hold when it is made (:func:`check_model`): no attribute stored under a name the
library stores itself, and the relations it inherits holding for it (a ``TTLAttribute`` a subclass adds). A
relation is passed to them: :class:`Relation` calls them.

A relation's per-child methods (:meth:`Relation.parent_key`, :meth:`Relation.changes`...) serve its users and the
audits; a counted write reads the relation compiled (``_spec.RelationSpec``) and runs its functions itself
(``write._deltas``), with the errors made here (:func:`key_failed`, :func:`call_failed`, :func:`when_refused`,
:func:`amount_refused`, :func:`normalize_key`).
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref
from types import CodeType, FrameType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    overload,
)

import pynamodb
from pynamodb.attributes import Attribute, DiscriminatorAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE, STREAM_OLD_IMAGE

from .._keys import ParentKey, discriminator_of, holds
from .._write_results import CounterChange
from ..exceptions import ChildValueError, ConfigurationError, ConfigurationWarning
from ._attributes import CounterField
from ._counted import counted_classes, forget_specs, note_declared, require_mixin, same_class
from ._counting_rule import CountingRule, call_failed
from ._expiry_rules import STREAM, check_expiries, check_inherited_expiries, check_record_markers
from ._feeder_ids import check_feeder_id, feeder_entry
from ._identity import compile_identity, related, told_apart_when_declared
from ._shards import check_shardable
from ._stored_names import OUTSIDE, STORED_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["COUNTINGS", "MAX_FEEDER", "TRANSACTION", "check_counting", "Relation", "check_declaration",
           "check_model", "check_options", "check_parent_defaults", "counted_by", "declared_prefixes", "made"]

KeyFunction = Callable[[Any], Any]
ChildCounter = Callable[[ParentKey], int]

UNREGISTERED: Set[weakref.ReferenceType[Relation]] = set()
"""The relations made by :func:`counted_by` that no class has registered yet: in a class body until its
``__set_name__``, or assigned after one until first use. Held weakly (one that is dropped was never declared), in
a plain set, so that the check made on every write while it is empty is a C-level truth test. Mutated, never
rebound."""
REGISTERING = threading.RLock()
"""Held by one registration at a time, so that two threads registering one relation agree."""


TRANSACTION = "transaction"
"""``counted_by(..., counting="transaction")``, the default: each counted write is one TransactWriteItems."""

COUNTINGS = (TRANSACTION, STREAM)
"""The values ``counted_by(counting=...)`` takes."""


class Relation:
    """Children of :attr:`child_model` are counted in :attr:`counter` of the parent their key names
    (:meth:`parent_key`).

    Created by :func:`counted_by`; immutable once its class is built. The per-child hooks :meth:`applies` and
    :meth:`amount` are where conditional and sum counters plug in.
    """

    __slots__ = {
        "counter": "The parent's counter attribute.",
        "reads": "The child attributes declared with ``reads=``.",
        "prefix": "The sort key prefix of the children in their parent's partition (``\"LIKE#\"``), for audits.",
        "children": "The caller's function counting one parent's children, for layouts a prefix cannot describe.",
        "feeder": "The stable name given as ``counted_by(..., feeder=...)``, or ``None``.",
        "create_parent": "Whether the parent is created by its first count (a rollup: daily likes, hourly signups).",
        "counting": "Where its children are counted: ``\"transaction\"`` (in each counted write's transaction) or "
                    "``\"stream\"`` (from the table's stream, by :func:`pynamodb_counters.streams.count_stream`).",
        "expiries": "How the expiries of a child with a ``TTLAttribute`` are counted: ``\"stream\"``, "
                    "``\"ignored\"``, or ``None`` for a child that never expires.",
        "declared_on": "The model class that registered the relation, ``None`` before (:attr:`child_model` raises "
                       "then).",
        "functions": "The functions given to :func:`counted_by`: its key, ``when=`` and ``amount=`` (``None`` where "
                     "not given).",
        "conditional": "Whether a child counts only while ``when=`` holds, or adds ``amount=`` rather than one: an "
                       "audit must then read the children, not only count them.",
        "_key": None, "_name": None, "_feed": None, "_when": None, "_amount": None, "_parent_defaults": None,
        "_rule": None, "__weakref__": None,
    }

    def __init__(self, counter: CounterField, key: KeyFunction, reads: Iterable[str] = (),
                 prefix: Optional[str] = None, children: Optional[ChildCounter] = None,
                 when: Optional[Callable[[Any], bool]] = None, amount: Optional[Callable[[Any], int]] = None,
                 create_parent: bool = False,
                 parent_defaults: Optional[Callable[[Any], Dict[str, Any]]] = None,
                 feeder: Optional[str] = None, expiries: Optional[str] = None,
                 counting: str = TRANSACTION) -> None:
        check_options(counter, key, reads, prefix, children, when, amount, create_parent, parent_defaults,
                      feeder)
        check_counting(counter, counting, expiries)
        self.counter = counter
        self._key = key
        self.reads = frozenset(reads)
        self.prefix = prefix
        self.children = children
        self.declared_on: Optional[Type[Model]] = None
        self._name: Optional[str] = None
        self._feed: Optional[Tuple[Tuple[str, str], str]] = None  # (parent and child tables, entry) once read
        self.feeder = feeder
        self._when = when
        self._amount = amount
        self._rule: Optional[CountingRule] = None
        self.create_parent = create_parent
        self._parent_defaults = parent_defaults
        self.expiries = expiries
        self.counting = counting
        self.functions: Tuple[KeyFunction, Optional[Callable[[Any], bool]], Optional[Callable[[Any], int]]] = \
            (key, when, amount)
        self.conditional = when is not None or amount is not None
        with REGISTERING:
            UNREGISTERED.add(weakref.ref(self, UNREGISTERED.discard))

    def __set_name__(self, owner: Type[Any], name: str) -> None:
        """Register the relation as ``owner.name``, from ``owner``'s class body.

        :raises ConfigurationError: the declaration cannot work or would miscount; then none of ``owner``'s
          relations is registered.
        """
        self.register(owner, name, in_body=True)

    def register(self, owner: Type[Any], name: str, in_body: bool = False) -> None:
        """Register the relation as ``owner.name``: from its class body (``in_body``), or at first use when it was
        assigned after it (see ``_spec``). Every spec built before is dropped (``_counted.forget_specs``).

        :raises ConfigurationError: the declaration cannot work or would miscount. Nothing is registered: from a
          class body, none of the class's relations (the class is not made).
        """
        with REGISTERING:
            if self.declared_on is owner and self._name == name:  # another thread registered it meanwhile
                return
            try:
                check_declaration(self, owner, name)
                check_feeder_id(self, owner, name)
            except ConfigurationError:
                if in_body:
                    _withdraw(owner)
                raise
            self.declared_on = owner
            self._name = name
            self.counter._feeders.append(self)
            note_declared()
            UNREGISTERED.discard(weakref.ref(self))
        forget_specs(owner)  # every spec: its model's holds its relations, its parent's the requests it fed

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_name", None) is not None:
            raise AttributeError("a Relation is immutable once declared")
        object.__setattr__(self, name, value)

    @overload
    def __get__(self, instance: None, owner: Any) -> Relation: ...

    @overload
    def __get__(self, instance: Any, owner: Any) -> ParentKey: ...

    def __get__(self, instance: Any, owner: Any) -> Any:
        if self.declared_on is None and owner is not None:  # assigned after the class body: register it now
            self._register_found(owner)
        if instance is None:
            return self
        return self.parent_key(instance)

    def _register_found(self, owner: type) -> None:
        """Register the relation under the name and class that hold it, ``owner`` or one of its bases."""
        for klass in owner.__mro__:
            for name, value in list(vars(klass).items()):
                if value is self:
                    self.register(klass, name)
                    return

    # -- the declaration -------------------------------------------------------------------------------------
    @property
    def parent_model(self) -> Type[Model]:
        """The model that declares :attr:`counter`."""
        model: Optional[Type[Model]] = self.counter.model
        assert model is not None
        return model

    @property
    def attribute(self) -> str:
        """The counter's Python attribute name on :attr:`parent_model`."""
        assert self.counter.name is not None
        return self.counter.name

    @property
    def child_model(self) -> Type[Model]:
        """The model that declares this relation."""
        if self.declared_on is None:
            raise ConfigurationError("this relation is not declared on a model class")
        return self.declared_on

    @property
    def feeder_entry(self) -> str:
        """The entry a counted write through this relation records in the parent's feeder set
        (``like_tally<prefix=LIKE#``, see :doc:`reconciliation`): built once the class is built, and again if a
        model's table name changes."""
        tables = (self.parent_model.Meta.table_name, self.child_model.Meta.table_name)
        held = self._feed
        if held is None or held[0] != tables:
            held = (tables, feeder_entry(self))
            object.__setattr__(self, "_feed", held)
        return held[1]

    @property
    def name(self) -> str:
        """The relation's attribute name on the child model."""
        return self._name or "?"

    def __repr__(self) -> str:
        child = self.declared_on.__name__ if self.declared_on is not None else "?"
        parent = self.counter.model.__name__ if self.counter.model is not None else "?"
        return f"<Relation {child}.{self.name} -> {parent}.{self.counter.name or '?'}>"

    def parent_defaults(self, child: Model) -> Dict[str, Any]:
        """The attributes, by Python name, that a parent created by ``child``'s count starts with (set only where
        absent): ``parent_defaults=(child)``, or none.

        :raises ChildValueError: the function failed, or returned something other than a dict of the parent's
          attributes.
        """
        if self._parent_defaults is None:
            return {}
        try:
            defaults: Dict[str, Any] = self._parent_defaults(child)
        except Exception as error:  # a user function: any failure means the parent cannot be created
            raise call_failed(self, "parent_defaults", child, error) from error
        check_parent_defaults(self, defaults)
        return defaults

    # -- per child -------------------------------------------------------------------------------------------
    def _counting(self) -> CountingRule:
        """The relation's counting rule (``declare._counting_rule``), compiled once and again only if the
        counter's shards change: what :meth:`applies`, :meth:`amount`, :meth:`parent_key` and :meth:`changes` ask,
        as counted writes do."""
        rule = self._rule
        if rule is None or rule.shards != self.counter.shards:
            rule = self._compile_counting()
        return rule

    def _compile_counting(self) -> CountingRule:
        """Compile the relation's counting rule afresh and keep it (the write path's spec, compiled again when
        specs are dropped, shares it: ``declare._spec.compile_relation``)."""
        counter = self.counter
        assert counter.name is not None
        rule = CountingRule.compiled(self, self.parent_model, counter.name, self._key, self._when, self._amount,
                                     counter.shards)
        object.__setattr__(self, "_rule", rule)  # a memo: the declaration itself stays immutable
        return rule

    def applies(self, child: Model) -> bool:
        """Whether ``child`` counts: ``when=(child)``, or always without ``when=``.

        :raises ChildValueError: ``when=`` failed, or returned something other than ``True`` or ``False``.
        """
        return self._counting().counts(child)

    def amount(self, child: Model) -> int:
        """How much ``child`` adds to the counter: ``amount=(child)``, or one without ``amount=``. It may be ``0``
        or negative; the counter keeps its floor of zero (a write that would take it below zero is refused).

        :raises ChildValueError: ``amount=`` failed, or returned something other than an ``int``.
        """
        return self._counting().amount_of(child)

    def parent_key(self, child: Model) -> ParentKey:
        """The parent's key for ``child``: ``(hash,)`` or ``(hash, range)``.

        :raises ParentKeyError: the key function failed, or returned the wrong shape or a missing value.
        """
        return self._counting().parent_key(child)

    def changes(self, child: Model, sign: int) -> List[CounterChange]:
        """The counter changes that adding (``sign=+1``) or removing (``-1``) ``child`` makes."""
        change = self._counting().change(child, sign)
        return [] if change is None else [change]


def counted_by(counter: Any, *, key: KeyFunction, reads: Iterable[str] = (), prefix: Optional[str] = None,
               children: Optional[ChildCounter] = None, when: Optional[Callable[[Any], bool]] = None,
               amount: Optional[Callable[[Any], int]] = None, create_parent: bool = False,
               parent_defaults: Optional[Callable[[Any], Dict[str, Any]]] = None,
               feeder: Optional[str] = None, expiries: Optional[str] = None, counting: str = "transaction"
               ) -> Relation:
    """Declare, in a child model's body, that the child is counted in ``counter``.

    The declaration is checked when the class is made, and refused with
    :exc:`~pynamodb_counters.exceptions.ConfigurationError` where it would miscount: a second relation of the child
    counting it in the same counter with the same key, ``when=`` and ``amount=`` (each save would add 2), and
    the ``prefix=`` cases below. A relation assigned after the class body (``Category.parent = counted_by(...)``)
    is registered, with the same checks, at its model's first use (see :doc:`modelling`).

    :param counter: the parent's :class:`~pynamodb_counters.CounterField` as a class attribute
      (``Post.like_tally``); in a model counting its own kind (a tree), a counter declared earlier in the same
      class body (``subcategories``).
    :param key: maps a child to its parent's key: a hash key value, or a ``(hash, range)`` tuple.
    :param reads: the child attributes ``key``, ``when=`` and ``amount=`` read, when they cannot be detected by
      running them (for example when they read them through another object). ``update()`` counts actions that
      SET or REMOVE them, and refuses the others (their result is not known before sending).
    :param prefix: for audits (:mod:`pynamodb_counters.reconcile`): the children live in their parent's partition
      of the child model's table, with sort keys starting with ``prefix``; one strongly consistent Query counts
      them. The child model needs a range key, and no other child model may be counted on the same parents
      under an overlapping prefix of the same table (``LIKE#`` and ``LIKE#USER#``) unless one
      ``DiscriminatorAttribute`` tells their items apart.
    :param children: for audits, in other layouts: ``children(parent_key) -> int`` counts one parent's children
      (for example with a Query on a global secondary index); with ``when=`` or ``amount=``, it gives what the
      counter should hold (the children that count, or their sum).
    :param when: a conditional counter: the child counts only while ``when(child)`` is ``True`` (published,
      not soft-deleted). A child that stops or starts counting moves the counter in the same transaction as the
      write that changed it (see :doc:`children`).
    :param amount: a sum counter: the child adds ``amount(child)``, a whole number (``0`` and negative numbers
      included), instead of one. The counter keeps its floor of zero: a write that would take it below zero is
      refused with :exc:`~pynamodb_counters.exceptions.CounterUnderflowError`.
    :param create_parent: a rollup: the parent is created by its first count (daily likes per post), with no
      existence guard on an increment: its Update creates the item with its key, the counter and
      ``parent_defaults``. A decrement never creates a parent; a delete of a child whose rollup is gone (expired
      by TTL) deletes the child, and its result lists the change in ``rollups_gone`` (see :doc:`rollups`).
    :param parent_defaults: with ``create_parent``: ``parent_defaults(child) -> {attribute: value}``, the
      attributes a created parent starts with, set only where absent (a TTL, a label).
    :param feeder: a stable name for the relation in its parents' feeder records (``_cfeed``, see
      :doc:`reconciliation`), instead of the one derived from what it counts (its ``prefix=``, or its class and
      attribute names). Give one to keep a relation's records through a change of prefix or a class renamed, or
      to tell apart two relations that would otherwise get the same id.
    :param expiries: required of a child whose model has a ``TTLAttribute`` (DynamoDB deletes it by itself, outside
      any transaction): ``"stream"``, its expiries are taken off by
      :func:`pynamodb_counters.streams.count_expiries` on the table's stream; ``"ignored"``, knowingly not (the
      counter keeps counting expired children until a repair). See :doc:`expiring`. Not with
      ``counting="stream"``: a deletion by TTL is then a ``REMOVE`` like any other, counted once.
    :param counting: where the children are counted. ``"transaction"`` (the default): each counted write of a
      child is one TransactWriteItems with its counter changes. ``"stream"``: the child is written as plain
      PynamoDB writes it, by anyone, and :func:`pynamodb_counters.streams.count_stream` counts it from the table's
      stream, exactly once, later (see :doc:`stream-counting`). A counter with ``limit=`` cannot be fed from the
      stream: a limit needs the transaction.
    """
    return Relation(counter, key, reads, prefix, children, when, amount, create_parent, parent_defaults, feeder,
                    expiries, counting)


def _withdraw(owner: type) -> None:
    """Unregister every relation of ``owner``, a class whose body was refused: it is not made."""
    for value in vars(owner).values():
        if isinstance(value, Relation):
            UNREGISTERED.discard(weakref.ref(value))
            if value.declared_on is owner:
                feeders = value.counter._feeders
                feeders[:] = [feeder for feeder in feeders if feeder is not value]


MAX_FEEDER = 100
"""The longest ``feeder=`` name: it is stored on every parent the relation feeds."""


def check_counting(counter: CounterField, counting: Any, expiries: Optional[str]) -> None:
    """Refuse a ``counting=`` that is not one of :data:`COUNTINGS`, and a stream relation that feeds a limited
    counter or says how expiries are counted.

    :raises ConfigurationError: naming the option and what it takes.
    """
    if counting not in COUNTINGS:
        raise ConfigurationError(f"counted_by(counting=...) is 'transaction' (the default: each counted write is one "
                                 f"TransactWriteItems) or 'stream' (counted from the table's stream by "
                                 f"pynamodb_counters.streams.count_stream), not {counting!r}")
    if counting != STREAM or not isinstance(counter, CounterField):
        return
    if counter.limited:
        raise ConfigurationError(f"counted_by(counting='stream') cannot feed {counter}: it has a limit=\n"
                                 f"A limit refuses the write that would pass it, in the write's own transaction; "
                                 f"a child counted from the stream is written first and counted later. Count it "
                                 f"with counting='transaction', or drop the counter's limit=.")
    if expiries is not None:
        raise ConfigurationError(f"counted_by(counting='stream', expiries={expiries!r}): leave expiries= out\n"
                                 f"Counted from the stream, a deletion by TTL is a REMOVE like any other, counted "
                                 f"once by count_stream.")


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
                                   and 0 < len(feeder) <= MAX_FEEDER and not feeder.startswith(OUTSIDE)):
        raise ConfigurationError(f"counted_by(feeder=...) is a short stable name, not {feeder!r}\n"
                                 f"It names the relation in its parents' feeder records, such as 'reactions': 1 to "
                                 f"{MAX_FEEDER} characters, no surrounding spaces, not starting with {OUTSIDE!r} "
                                 f"(the library's own mark of children counted from outside a parent's partition).")
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
      another relation of ``owner`` already counts it the same way in the same counter, another child model's
      items are under an overlapping prefix of the same table with nothing to tell them apart, or, counted from the
      stream, nothing tells ``owner``'s items from its parent's in their one table (``_identity``).
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
    if relation.counting != STREAM:  # from the stream, a deletion by TTL is a REMOVE like any other
        check_expiries(owner, where, relation.expiries)
        for subclass in _made_subclasses(owner):  # a relation registered after them (assigned after the body)
            check_inherited_expiries(subclass, owner, where, _counter_of(relation), relation.expiries)
    _check_twins(relation, owner, name)
    if relation.prefix is not None:
        _check_neighbours(relation, owner, name, attributes)
    if relation.counting == STREAM:
        _check_told_apart(relation, owner, where, attributes)
        if _table_of(relation.parent_model) != _table_of(owner):  # every child outside its parent's partition
            check_record_markers(owner, where, declaring=True)
    if relation.counting == STREAM or relation.expiries == STREAM:
        _warn_without_images(relation, owner, where)


def check_model(owner: Type[Any], kind: Type[Any]) -> None:
    """Refuse ``owner``, a counted class, where it would miscount: an attribute of it, its own or inherited, stored
    under a name the library stores on items itself (``_stored_names.STORED_NAMES``, whatever its Python name), or a
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
            if isinstance(relation, kind) and relation.declared_on is klass and relation.counting != STREAM:
                check_inherited_expiries(owner, klass, f"{klass.__name__}.{name} = counted_by(...)",
                                         _counter_of(relation), relation.expiries)


def declared_prefixes(model: type) -> Tuple[str, ...]:
    """The ``prefix=`` of every relation ``model`` declares or inherits, registered or not (a class whose body is
    being run holds its relations in its namespace), each once."""
    return tuple(dict.fromkeys(value.prefix for klass in reversed(model.__mro__) for value in vars(klass).values()
                               if isinstance(value, Relation) and value.prefix is not None))


def _warn_without_images(relation: Any, owner: Type[Any], where: str) -> None:
    """Warn where ``owner``'s ``Meta`` does not give its table's stream the images a handler of ``relation`` reads
    (``create_table()`` makes the stream from it): a table made from it counts nothing, silently."""
    view = getattr(getattr(owner, "Meta", None), "stream_view_type", None)
    wanted = (STREAM_NEW_AND_OLD_IMAGE,) if relation.counting == STREAM else (STREAM_NEW_AND_OLD_IMAGE,
                                                                              STREAM_OLD_IMAGE)
    if view in wanted:
        return
    counted = "counted from the table's stream (counting='stream')" if relation.counting == STREAM else \
        "whose expiries are taken off from the table's stream (expiries='stream')"
    made = "no stream" if view is None else "a stream without the images it needs"
    warnings.warn(f"{where}: {owner.__name__} is {counted}, but {owner.__name__}.Meta.stream_view_type is "
                  f"{view!r}: a table created from the model has {made}, and nothing is counted.\n"
                  f"Set Meta.stream_view_type = STREAM_NEW_AND_OLD_IMAGE (from pynamodb.constants), and on a table "
                  f"made elsewhere enable it: aws dynamodb update-table --table-name {_table_of(owner)} "
                  f"--stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES",
                  ConfigurationWarning, stacklevel=_callers_level())


def _callers_level() -> int:
    """The ``stacklevel`` of a warning raised here that names the first frame outside this package and PynamoDB:
    the user's class statement, or their first use of a relation assigned after its body."""
    ours = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(pynamodb.__file__))
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(ours):
        frame, level = frame.f_back, level + 1
    return level


def _check_told_apart(relation: Any, owner: Type[Any], where: str, attributes: Dict[str, Attribute[Any]]) -> None:
    """Refuse a relation counted from the stream whose child's items nothing tells from its parent's, in one table:
    the handler would count the parent's own records (``_identity``)."""
    parent = relation.parent_model
    if parent.Meta.table_name != _table_of(owner) or related(owner, parent):
        return
    theirs = compile_identity(parent, parent.get_attributes(), declared_prefixes(parent), discriminator_of(parent))
    told_apart_when_declared(owner, theirs, where, attributes, declared_prefixes(owner))


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
