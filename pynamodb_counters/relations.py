"""
``counted_by``: the declaration that a child model is counted in a parent's :class:`CounterField`.

A relation is declared once, in the child model's class body::

    class Like(CounterMixin, Model):
        ...
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"))

``Like.post`` is then the immutable :class:`Relation`; ``like.post`` is the parent key of one like (no I/O).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Tuple, Type, overload

from ._base import feed_entry, require_mixin
from ._compat import ParentKey, normalize_key
from ._results import CounterChange
from ._shards import check_shardable, choose_shard
from .attributes import CounterField
from .exceptions import ChildValueError, ConfigurationError, ParentKeyError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["Relation", "counted_by"]

KeyFunction = Callable[[Any], Any]
MAX_FEEDER = 100
"""The longest ``feeder=`` name: it is stored on every parent the relation feeds."""
ChildCounter = Callable[[ParentKey], int]


class Relation:
    """Children of :attr:`child_model` are counted in :attr:`counter` of the parent that :attr:`key` names.

    Created by :func:`counted_by`; immutable once its class is built. The per-child hooks :meth:`applies` and
    :meth:`amount` are where conditional and sum counters plug in.
    """

    __slots__ = ("_counter", "_key", "_reads", "_prefix", "_children", "_child_model", "_name", "_feed", "_when",
                 "_amount", "_create_parent", "_parent_defaults", "_feeder")

    def __init__(self, counter: CounterField, key: KeyFunction, reads: Iterable[str] = (),
                 prefix: Optional[str] = None, children: Optional[ChildCounter] = None,
                 when: Optional[Callable[[Any], bool]] = None, amount: Optional[Callable[[Any], int]] = None,
                 create_parent: bool = False,
                 parent_defaults: Optional[Callable[[Any], Dict[str, Any]]] = None,
                 feeder: Optional[str] = None) -> None:
        if not isinstance(counter, CounterField):
            raise ConfigurationError(
                f"counted_by() needs a parent's CounterField, such as Post.like_tally; got {counter!r}"
            )
        if counter.model is None:
            raise ConfigurationError("counted_by() needs a CounterField declared on a model class")
        if not callable(key):
            raise ConfigurationError(f"counted_by(key=...) must be a callable mapping a child to its parent's key; "
                                     f"got {key!r}")
        if isinstance(reads, str):
            raise ConfigurationError("counted_by(reads=...) takes a sequence of attribute names, not a string")
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise ConfigurationError(f"counted_by(prefix=...) is a non-empty sort key prefix such as 'LIKE#', "
                                     f"not {prefix!r}")
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
        if counter.shards > 1:
            check_shardable(counter.model, counter)
        self._counter = counter
        self._key = key
        self._reads = frozenset(reads)
        self._prefix = prefix
        self._children = children
        self._child_model: Optional[Type[Model]] = None
        self._name: Optional[str] = None
        self._feed: Optional[Tuple[Tuple[str, str], str]] = None  # (parent and child tables, entry) once read
        if feeder is not None and not (isinstance(feeder, str) and feeder.strip() == feeder
                                       and 0 < len(feeder) <= MAX_FEEDER):
            raise ConfigurationError(f"counted_by(feeder=...) is a short stable name for the relation in its "
                                     f"parents' feeder records, such as 'reactions' (1 to {MAX_FEEDER} characters, "
                                     f"no surrounding spaces), not {feeder!r}")
        self._feeder = feeder
        if not isinstance(create_parent, bool):
            raise ConfigurationError(f"counted_by(create_parent=...) is True or False, not {create_parent!r}")
        if parent_defaults is not None and not (create_parent and callable(parent_defaults)):
            raise ConfigurationError("counted_by(parent_defaults=...) is a function of the child giving the "
                                     "attributes a parent created by its first count starts with; it needs "
                                     "create_parent=True")
        if create_parent and counter.shards > 1:
            raise ConfigurationError(f"counted_by({counter!r}, create_parent=True): a parent created by its first "
                                     f"count cannot have a sharded counter (its shard items would not exist)")
        self._when = when
        self._amount = amount
        self._create_parent = create_parent
        self._parent_defaults = parent_defaults

    def __set_name__(self, owner: Type[Any], name: str) -> None:
        if self._child_model is not None:
            raise ConfigurationError(f"one relation cannot be declared twice ({self} and {owner.__name__}.{name})")
        require_mixin(owner, f"{owner.__name__}.{name} = counted_by(...)")
        self._child_model = owner
        self._name = name
        self._counter._feeders.append(self)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_name", None) is not None:
            raise AttributeError("a Relation is immutable once declared")
        object.__setattr__(self, name, value)

    @overload
    def __get__(self, instance: None, owner: Any) -> Relation: ...

    @overload
    def __get__(self, instance: Any, owner: Any) -> ParentKey: ...

    def __get__(self, instance: Any, owner: Any) -> Any:
        if instance is None:
            return self
        return self.parent_key(instance)

    # -- the declaration -------------------------------------------------------------------------------------
    @property
    def counter(self) -> CounterField:
        """The parent's counter attribute."""
        return self._counter

    @property
    def parent_model(self) -> Type[Model]:
        """The model that declares :attr:`counter`."""
        model: Optional[Type[Model]] = self._counter.model
        assert model is not None
        return model

    @property
    def attribute(self) -> str:
        """The counter's Python attribute name on :attr:`parent_model`."""
        assert self._counter.name is not None
        return self._counter.name

    @property
    def child_model(self) -> Type[Model]:
        """The model that declares this relation."""
        if self._child_model is None:
            raise ConfigurationError("this relation is not declared on a model class")
        return self._child_model

    @property
    def reads(self) -> FrozenSet[str]:
        """The child attributes declared with ``reads=``."""
        return self._reads

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
    def feeder(self) -> Optional[str]:
        """The stable name given as ``counted_by(..., feeder=...)``, or ``None``."""
        return self._feeder

    @property
    def prefix(self) -> Optional[str]:
        """The sort key prefix of the children in their parent's partition (``"LIKE#"``), for audits."""
        return self._prefix

    @property
    def children(self) -> Optional[ChildCounter]:
        """The caller's function counting one parent's children, for layouts a prefix cannot describe."""
        return self._children

    @property
    def name(self) -> str:
        """The relation's attribute name on the child model."""
        return self._name or "?"

    def __repr__(self) -> str:
        child = self._child_model.__name__ if self._child_model is not None else "?"
        return f"<Relation {child}.{self.name} -> {self.parent_model.__name__}.{self.attribute}>"

    @property
    def create_parent(self) -> bool:
        """Whether the parent is created by its first count (a rollup: daily likes, hourly signups)."""
        return self._create_parent

    def parent_defaults(self, child: Model) -> Dict[str, Any]:
        """The attributes, by Python name, that a parent created by ``child``'s count starts with (set only where
        absent): ``parent_defaults=(child)``, or none.

        :raises ChildValueError: the function failed, or returned something other than a dict of the parent's
          attributes.
        """
        if self._parent_defaults is None:
            return {}
        defaults = self._call("parent_defaults", self._parent_defaults, child)
        attributes = self.parent_model.get_attributes()
        if not isinstance(defaults, dict) or not all(name in attributes and not isinstance(attributes[name],
                                                                                              CounterField)
                                                     for name in defaults):
            raise ChildValueError(f"{self}: parent_defaults= returned {defaults!r}; it must return a dict of "
                                  f"{self.parent_model.__name__}'s attributes (not its counters) by name. Nothing "
                                  f"was written")
        return defaults

    @property
    def conditional(self) -> bool:
        """Whether a child counts only while ``when=`` holds, or adds ``amount=`` rather than one: an audit must
        then read the children, not only count them."""
        return self._when is not None or self._amount is not None

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
        counter = self._counter
        shards = counter.shards
        return [CounterChange(counter.model, self.parent_key(child), counter.name,  # type: ignore[arg-type]
                              sign * self.amount(child), choose_shard(child, shards) if shards > 1 else 0)]

    def read_attributes(self, child: Model) -> FrozenSet[str]:
        """The child's attributes that decide what it adds to which parent: the declared ``reads`` plus those the
        key, ``when=`` and ``amount=`` functions touch on ``child`` (detected by running them on a recording
        proxy)."""
        recorder = _Recorder(child)
        for function in (self._key, self._when, self._amount):
            if function is None:
                continue
            try:
                function(recorder)
            except Exception:  # detection is best effort; parent_key() and the rest report the real failure
                pass
        attributes = child.get_attributes()
        return self._reads | frozenset(name for name in recorder.seen if name in attributes)


def counted_by(counter: Any, *, key: KeyFunction, reads: Iterable[str] = (), prefix: Optional[str] = None,
               children: Optional[ChildCounter] = None, when: Optional[Callable[[Any], bool]] = None,
               amount: Optional[Callable[[Any], int]] = None, create_parent: bool = False,
               parent_defaults: Optional[Callable[[Any], Dict[str, Any]]] = None,
               feeder: Optional[str] = None) -> Relation:
    """Declare, in a child model's body, that the child is counted in ``counter``.

    :param counter: the parent's :class:`~pynamodb_counters.CounterField` as a class attribute
      (``Post.like_tally``).
    :param key: maps a child to its parent's key: a hash key value, or a ``(hash, range)`` tuple.
    :param reads: the child attributes ``key``, ``when=`` and ``amount=`` read, when they cannot be detected by
      running them (for example when they read them through another object). ``update()`` counts actions that
      SET or REMOVE them, and refuses the others (their result is not known before sending).
    :param prefix: for audits (:mod:`pynamodb_counters.reconcile`): the children live in their parent's partition
      of the child model's table, with sort keys starting with ``prefix``; one strongly consistent Query counts
      them.
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
    """
    return Relation(counter, key, reads, prefix, children, when, amount, create_parent, parent_defaults, feeder)


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


class _Recorder:
    """Stands in for a child and records the attribute names read from it."""

    __slots__ = ("_target", "seen")

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "seen", set())

    def __getattr__(self, name: str) -> Any:
        self.seen.add(name)
        return getattr(self._target, name)
