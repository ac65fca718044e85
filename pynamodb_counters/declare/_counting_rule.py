"""
The counting rule: what a relation counts a child as (whether it counts, into which parent's key, by how much, on
which shard), compiled once from the declaration into a :class:`CountingRule`, and the one place its user
functions (``key=``, ``when=``, ``amount=``) are run and their results checked. Counted writes
(``write._deltas``), audits (``reconcile._audit_rules``) and the stream handlers (through the write path) all count
with it, so a fix to the rule cannot leave one of them counting otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .._keys import ParentKey
from .._write_results import CounterChange
from ..exceptions import ChildValueError, ParentKeyError
from ._shards import choose_shard

__all__ = ["CountingRule", "KeyFunctionOf", "amount_refused", "call_failed", "key_failed", "normalize_key",
           "when_refused"]


@dataclass(frozen=True)
class CountingRule:
    """One relation's rule, compiled from its declaration (:meth:`compiled`).

    :ivar relation: the declaration (errors name it).
    :ivar parent_model: the model that declares the counter.
    :ivar attribute: the counter's Python name on the parent.
    :ivar key: the key function; :ivar when: ``when=`` or ``None``; :ivar amount: ``amount=`` or ``None``.
    :ivar shards: the counter's shards, when compiled.
    :ivar key_size: how many values the parent's key holds (1, or 2 with a range key).
    """

    relation: Any
    parent_model: Any
    attribute: str
    key: Callable[[Any], Any]
    when: Optional[Callable[[Any], Any]]
    amount: Optional[Callable[[Any], Any]]
    shards: int
    key_size: int

    @classmethod
    def compiled(cls, relation: Any, parent_model: Any, attribute: str, key: Callable[[Any], Any],
                 when: Optional[Callable[[Any], Any]], amount: Optional[Callable[[Any], Any]],
                 shards: int) -> CountingRule:
        """The rule of ``relation``, counting into ``parent_model``'s ``attribute`` with ``shards`` shards."""
        return cls(relation, parent_model, attribute, key, when, amount, shards,
                   2 if parent_model._range_keyname else 1)

    def change(self, child: Any, sign: int, reader: Optional[Any] = None) -> Optional[CounterChange]:
        """The change that adding (``sign=+1``) or removing (``-1``) ``child`` makes, ``None`` where ``when=``
        says it does not count. The functions run on ``reader`` (a recorder of ``child``, which notes what they
        read) where given, else on ``child``.

        :raises ParentKeyError: the key function failed, or gave the wrong shape or a missing value.
        :raises ChildValueError: ``when=`` or ``amount=`` failed or gave something else than a bool or an int.
        """
        on = child if reader is None else reader
        if self.when is not None and not self.counts(child, on):
            return None
        key = self.parent_key(child, on)
        delta = sign if self.amount is None else sign * self.amount_of(child, on)
        shards = self.shards
        return CounterChange(self.parent_model, key, self.attribute, delta,
                             choose_shard(child, shards) if shards > 1 else 0)

    def counts(self, child: Any, on: Any = None) -> bool:
        """Whether ``child`` counts: ``when=(child)``, or always without ``when=``.

        :raises ChildValueError: ``when=`` failed, or returned something other than ``True`` or ``False``.
        """
        if self.when is None:
            return True
        counts = self._run("when", self.when, child, on)
        if counts is not True and counts is not False:
            raise when_refused(self.relation, child, counts)
        return counts

    def amount_of(self, child: Any, on: Any = None) -> int:
        """How much ``child`` adds: ``amount=(child)``, or one without ``amount=``.

        :raises ChildValueError: ``amount=`` failed, or returned something other than an ``int``.
        """
        if self.amount is None:
            return 1
        value = self._run("amount", self.amount, child, on)
        if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
            raise amount_refused(self.relation, child, value)
        whole: int = value
        return whole

    def parent_key(self, child: Any, on: Any = None) -> ParentKey:
        """The parent's key for ``child``: ``(hash,)`` or ``(hash, range)``.

        :raises ParentKeyError: the key function failed, or returned the wrong shape or a missing value.
        """
        try:  # _run(), inlined: the path of every counted write
            raw = self.key(child if on is None else on)
        except Exception as error:  # a user function: any failure means the child cannot name its parent
            if on is None or on is child:
                raise key_failed(self.relation, child, error) from error
            raw = self._on_child(None, self.key, child)
        key = raw if type(raw) is tuple else tuple(raw) if isinstance(raw, (tuple, list)) else (raw,)
        if len(key) != self.key_size or None in key:
            key = normalize_key(self.parent_model, raw, KeyFunctionOf(self.relation))  # it says what is wrong
        return key

    def _run(self, option: Optional[str], function: Callable[[Any], Any], child: Any, on: Any) -> Any:
        """``function(on)``, a user function (``option=``; ``None`` for the key function), ``on`` being ``child``
        or its recorder; failing on the recorder, it runs on the child itself (:meth:`_on_child`).

        :raises ChildValueError: ``when=`` or ``amount=`` failed on ``child``.
        :raises ParentKeyError: the key function failed on ``child``.
        """
        try:
            return function(child if on is None else on)
        except Exception as error:  # a user function: any failure means the child cannot be counted
            if on is None or on is child:
                raise _failed(self.relation, option, child, error) from error
        return self._on_child(option, function, child)

    def _on_child(self, option: Optional[str], function: Callable[[Any], Any], child: Any) -> Any:
        """``function(child)`` after it failed on the child's recorder (which is not an instance of the child's
        class: ``super()`` in a property, ``type(child)``): what it read before failing is recorded, and the child
        is counted as the function counts it, or refused with its own failure."""
        try:
            return function(child)
        except Exception as error:  # a user function: any failure means the child cannot be counted
            raise _failed(self.relation, option, child, error) from error


def _failed(relation: Any, option: Optional[str], child: Any, error: Exception) -> Exception:
    return key_failed(relation, child, error) if option is None else call_failed(relation, option, child, error)


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


def _describe(child: Any) -> str:
    try:
        return repr(child._get_keys())
    except Exception:
        return "(key unreadable)"


def key_failed(relation: Any, child: Any, error: Exception) -> ParentKeyError:
    """The error of a relation's key function that failed on ``child``."""
    return ParentKeyError(f"{relation}: the key function failed on {type(child).__name__} {_describe(child)}: "
                          f"{error!r}; does the child have the attributes the key needs?", error)


def call_failed(relation: Any, option: str, child: Any, error: Exception) -> ChildValueError:
    """The error of a relation's user function given as ``option=`` (``when``, ``amount``, ``parent_defaults``)
    that failed on ``child``: the child cannot be counted."""
    return ChildValueError(f"{relation}: {option}= failed on {type(child).__name__} {_describe(child)}: "
                           f"{error!r}; nothing was written", error)


def when_refused(relation: Any, child: Any, counts: Any) -> ChildValueError:
    """The error of a ``when=`` that returned ``counts``, not ``True`` or ``False``, for ``child``."""
    return ChildValueError(f"{relation}: when= returned {counts!r} ({type(counts).__name__}) for "
                           f"{type(child).__name__} {_describe(child)}; it must return True or False. "
                           f"Nothing was written")


def amount_refused(relation: Any, child: Any, value: Any) -> ChildValueError:
    """The error of an ``amount=`` that returned ``value``, not an ``int``, for ``child``."""
    return ChildValueError(f"{relation}: amount= returned {value!r} ({type(value).__name__}) for "
                           f"{type(child).__name__} {_describe(child)}; it must return a whole number (an "
                           f"int). Nothing was written")


class KeyFunctionOf:
    """Names a relation's key function in errors, formatting the relation only when an error needs it."""

    __slots__ = ("relation",)

    def __init__(self, relation: Any) -> None:
        self.relation = relation

    def __str__(self) -> str:
        return f"{self.relation}: the key function"
