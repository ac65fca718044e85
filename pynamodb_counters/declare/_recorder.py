"""
What relations' functions (their key, ``when=``, ``amount=``) read of a child (:func:`read_by`), found by running
them on a :class:`Recorder`, a stand-in that records each name read. What a counted edit, update or delete is
conditioned on comes from it. Declarations only, no I/O.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Dict, Iterable, Set, Tuple

__all__ = ["Recorder", "read_by", "seen_by"]


def read_by(relations: Iterable[Any], states: Iterable[Any]) -> Set[str]:
    """The attributes (Python names) that decide what a child adds to which parent, in any of ``states`` (the
    child's instances): each relation's declared ``reads``, plus those its key, ``when=`` and ``amount=``
    functions touch on each state (found by running them on a :class:`Recorder`; a function that fails on one
    counts what it read before failing: parent_key() and the rest report the real failure)."""
    states = tuple(states)
    names: Set[str] = set()
    for relation in relations:
        names.update(relation.reads)
        for state in states:
            recorder = Recorder(state)
            for function in relation.functions:
                if function is None:
                    continue
                try:
                    function(recorder)
                except Exception:  # detection is best effort
                    pass
            attributes = state.get_attributes()
            names.update(name for name in seen_by(recorder) if name in attributes)
    return names


class Recorder:
    """Stands in for a child and records the names read from it, passing each read on to the child.

    A read of a property, a ``functools.cached_property`` or a method of the child's own model classes runs it
    on the recorder, so that the attributes it reads are recorded too. The recorder reaches its own state
    through its slot descriptors, never by name: a child attribute of any name (``seen``, ``_target``...) is
    recorded like any other."""

    __slots__ = ("_recorder_target", "_recorder_seen")

    def __init__(self, target: Any) -> None:
        _TARGET.__set__(self, target)
        _SEEN.__set__(self, set())

    def __getattribute__(self, name: str) -> Any:
        _SEEN.__get__(self).add(name)
        target = _TARGET.__get__(self)
        followed = _followed(type(target), name)
        if followed is None:
            return getattr(target, name)
        if isinstance(followed, property):
            return followed.fget(self)  # type: ignore[misc]
        if isinstance(followed, functools.cached_property):
            return followed.func(self)
        return types.MethodType(followed, self)


_TARGET = Recorder.__dict__["_recorder_target"]
_SEEN = Recorder.__dict__["_recorder_seen"]
_FOLLOWED: Dict[Tuple[type, str], Any] = {}


def seen_by(recorder: Recorder) -> Set[str]:
    """The names read from ``recorder``."""
    seen: Set[str] = _SEEN.__get__(recorder)
    return seen


def _followed(model: type, name: str) -> Any:
    """What a recorder runs itself for a read of ``name`` on an instance of ``model``: a property (with a getter),
    a cached property or a plain function, defined on one of the user's model classes (not on PynamoDB's or this
    library's), whose own reads then reach the recorder; ``None`` for anything else."""
    try:
        return _FOLLOWED[(model, name)]
    except KeyError:
        pass
    found = None
    for klass in model.__mro__:
        if name in klass.__dict__:
            value = klass.__dict__[name]
            own = klass.__module__.split(".")[0] not in ("pynamodb", "pynamodb_counters", "builtins")
            if own and ((isinstance(value, property) and value.fget is not None) or
                        isinstance(value, (functools.cached_property, types.FunctionType))):
                found = value
            break
    _FOLLOWED[(model, name)] = found
    return found
