"""
``counted_by``: the declaration that a child model is counted in a parent's :class:`CounterField`.

A relation is declared once, in the child model's class body::

    class Like(CounterMixin, Model):
        ...
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"))

``Like.post`` is then the immutable :class:`Relation`; ``like.post`` is the parent key of one like (no I/O).

A model counting its own kind (a tree) names a counter declared earlier in the same body, or assigns the relation
after the body (``Category.parent = counted_by(Category.subcategories, ...)``): such a relation is registered at
first use (its model's first write, its counter's audit, a read of ``Category.parent``), with the same checks,
and never counts before.
"""
from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple, Type, overload

from .._compat import ParentKey
from .._results import CounterChange
from ..exceptions import ChildValueError, ConfigurationError, ParentKeyError
from ._attributes import CounterField
from ._base import check_feeder_id, feed_entry, forget_specs, note_declared
from ._recorder import read_by
from ._relation_rules import check_declaration, check_options, check_parent_defaults
from ._shards import choose_shard

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["Relation", "counted_by"]

KeyFunction = Callable[[Any], Any]
ChildCounter = Callable[[ParentKey], int]

UNREGISTERED: Set[weakref.ReferenceType[Relation]] = set()
"""The relations made by :func:`counted_by` that no class has registered yet: in a class body until its
``__set_name__``, or assigned after one until first use. Held weakly (one that is dropped was never declared), in
a plain set, so that the check made on every write while it is empty is a C-level truth test. Mutated, never
rebound."""
REGISTERING = threading.RLock()
"""Held by one registration at a time, so that two threads registering one relation agree."""


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
        "expiries": "How the expiries of a child with a ``TTLAttribute`` are counted: ``\"stream\"``, "
                    "``\"ignored\"``, or ``None`` for a child that never expires.",
        "declared_on": "The model class that registered the relation, ``None`` before (:attr:`child_model` raises "
                       "then).",
        "functions": "The functions given to :func:`counted_by`: its key, ``when=`` and ``amount=`` (``None`` where "
                     "not given).",
        "conditional": "Whether a child counts only while ``when=`` holds, or adds ``amount=`` rather than one: an "
                       "audit must then read the children, not only count them.",
        "_key": None, "_name": None, "_feed": None, "_when": None, "_amount": None, "_parent_defaults": None,
        "__weakref__": None,
    }

    def __init__(self, counter: CounterField, key: KeyFunction, reads: Iterable[str] = (),
                 prefix: Optional[str] = None, children: Optional[ChildCounter] = None,
                 when: Optional[Callable[[Any], bool]] = None, amount: Optional[Callable[[Any], int]] = None,
                 create_parent: bool = False,
                 parent_defaults: Optional[Callable[[Any], Dict[str, Any]]] = None,
                 feeder: Optional[str] = None, expiries: Optional[str] = None) -> None:
        check_options(counter, key, reads, prefix, children, when, amount, create_parent, parent_defaults,
                      feeder)
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
        self.create_parent = create_parent
        self._parent_defaults = parent_defaults
        self.expiries = expiries
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
        assigned after it (see ``_spec``). Any spec built before for ``owner`` or its subclasses is dropped.

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
        if not in_body:
            forget_specs(owner)

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
    def feed(self) -> str:
        """The entry a counted write through this relation records in the parent's feeder set
        (``like_tally<prefix=LIKE#``, see :doc:`reconciliation`): built once the class is built, and again if a
        model's table name changes."""
        tables = (self.parent_model.Meta.table_name, self.child_model.Meta.table_name)
        held = self._feed
        if held is None or held[0] != tables:
            held = (tables, feed_entry(self))
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
        defaults: Dict[str, Any] = self._call("parent_defaults", self._parent_defaults, child)
        check_parent_defaults(self, defaults)
        return defaults

    # -- per child -------------------------------------------------------------------------------------------
    def applies(self, child: Model) -> bool:
        """Whether ``child`` counts: ``when=(child)``, or always without ``when=``.

        :raises ChildValueError: ``when=`` failed, or returned something other than ``True`` or ``False``.
        """
        if self._when is None:
            return True
        counts = self._call("when", self._when, child)
        if not isinstance(counts, bool):
            raise ChildValueError(f"{self}: when= returned {counts!r} ({type(counts).__name__}) for "
                                  f"{type(child).__name__} {_describe(child)}; it must return True or False. "
                                  f"Nothing was written")
        return counts

    def amount(self, child: Model) -> int:
        """How much ``child`` adds to the counter: ``amount=(child)``, or one without ``amount=``. It may be ``0``
        or negative; the counter keeps its floor of zero (a write that would take it below zero is refused).

        :raises ChildValueError: ``amount=`` failed, or returned something other than an ``int``.
        """
        if self._amount is None:
            return 1
        value = self._call("amount", self._amount, child)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ChildValueError(f"{self}: amount= returned {value!r} ({type(value).__name__}) for "
                                  f"{type(child).__name__} {_describe(child)}; it must return a whole number (an "
                                  f"int). Nothing was written")
        whole: int = value
        return whole

    def _call(self, option: str, function: Callable[[Any], Any], child: Model) -> Any:
        """``function(child)``, the user function given as ``option=``.

        :raises ChildValueError: it failed: the child cannot be counted.
        """
        try:
            return function(child)
        except Exception as error:  # a user function: any failure means the child cannot be counted
            raise ChildValueError(f"{self}: {option}= failed on {type(child).__name__} {_describe(child)}: "
                                  f"{error!r}; nothing was written", error) from error

    def parent_key(self, child: Model) -> ParentKey:
        """The parent's key for ``child``: ``(hash,)`` or ``(hash, range)``.

        :raises ParentKeyError: the key function failed, or returned the wrong shape or a missing value.
        """
        try:
            raw = self._key(child)
        except Exception as error:  # a user function: any failure means the child cannot name its parent
            raise ParentKeyError(f"{self}: the key function failed on {type(child).__name__} {_describe(child)}: "
                                 f"{error!r}; does the child have the attributes the key needs?", error) from error
        return normalize_key(self.parent_model, raw, _KeyFunctionOf(self))

    def changes(self, child: Model, sign: int) -> List[CounterChange]:
        """The counter changes that adding (``sign=+1``) or removing (``-1``) ``child`` makes."""
        if not self.applies(child):
            return []
        counter = self.counter
        shards = counter.shards
        return [CounterChange(counter.model, self.parent_key(child), counter.name,  # type: ignore[arg-type]
                              sign * self.amount(child), choose_shard(child, shards) if shards > 1 else 0)]

    def read_attributes(self, child: Model) -> FrozenSet[str]:
        """The child's attributes that decide what it adds to which parent: the declared ``reads`` plus those the
        key, ``when=`` and ``amount=`` functions touch on ``child`` (detected by running them on a recording
        proxy)."""
        return frozenset(read_by((self,), (child,)))


def counted_by(counter: Any, *, key: KeyFunction, reads: Iterable[str] = (), prefix: Optional[str] = None,
               children: Optional[ChildCounter] = None, when: Optional[Callable[[Any], bool]] = None,
               amount: Optional[Callable[[Any], int]] = None, create_parent: bool = False,
               parent_defaults: Optional[Callable[[Any], Dict[str, Any]]] = None,
               feeder: Optional[str] = None, expiries: Optional[str] = None) -> Relation:
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
      counter keeps counting expired children until a repair). See :doc:`expiring`.
    """
    return Relation(counter, key, reads, prefix, children, when, amount, create_parent, parent_defaults, feeder,
                    expiries)


def normalize_key(model: type, raw: Any, where: object) -> ParentKey:
    """``raw`` (a hash key value, or a ``(hash, range)`` tuple) as a key tuple of ``model``; ``where`` names the
    source in errors (formatted only then).

    :raises ParentKeyError: the wrong shape for ``model``'s key, or a missing value.
    """
    key = tuple(raw) if isinstance(raw, (tuple, list)) else (raw,)
    if len(key) == (2 if model._range_keyname else 1) and None not in key:  # type: ignore[attr-defined]
        return key  # the usual case, checked without building names for an error
    names = [model._hash_keyname] + ([model._range_keyname] if model._range_keyname else [])  # type: ignore
    if len(key) != len(names):
        shape = "(hash, range) tuple" if len(names) == 2 else "hash key value"
        raise ParentKeyError(f"{where} gave {raw!r}, but {model.__name__}'s key is a {shape} ({', '.join(names)})")
    for name, value in zip(names, key):
        if value is None:
            raise ParentKeyError(f"{where} gave None for {model.__name__}.{name}; does the child have the "
                                 f"attributes the key needs?")
    return key


def _withdraw(owner: type) -> None:
    """Unregister every relation of ``owner``, a class whose body was refused: it is not made."""
    for value in vars(owner).values():
        if isinstance(value, Relation):
            UNREGISTERED.discard(weakref.ref(value))
            if value.declared_on is owner:
                feeders = value.counter._feeders
                feeders[:] = [feeder for feeder in feeders if feeder is not value]


def _describe(child: Any) -> str:
    try:
        return repr(child._get_keys())
    except Exception:
        return "(key unreadable)"


class _KeyFunctionOf:
    """Names a relation's key function in errors, formatting the relation only when an error needs it."""

    __slots__ = ("relation",)

    def __init__(self, relation: Relation) -> None:
        self.relation = relation

    def __str__(self) -> str:
        return f"{self.relation}: the key function"


