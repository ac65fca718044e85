"""
What every counted model shares, below any declaration: the base that marks a model as counted (every counted
model class is one of its subclasses, which is how the library finds every relation loaded, without a registry
of its own), the spec each holds, and the refusal of a counter or relation on a model without the mixin.

Declarations only, no I/O.
"""
from __future__ import annotations

from typing import Any, Iterator, List, Type

from pynamodb.models import Model

from ..exceptions import ConfigurationError

__all__ = ["CountedBase", "MAX_SHARDS", "SPEC_HELD", "counted_classes", "declared", "forget_specs", "note_declared",
           "require_mixin", "same_class", "subclasses_of"]

MAX_SHARDS = 100
"""The most shards a counter may have: one BatchGetItem (at most 100 keys) reads them all, and one transaction
(at most 100 actions) creates them with their parent."""


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
    return subclasses_of(CountedBase)


def subclasses_of(base: Type[Any]) -> Iterator[Type[Any]]:
    """Every class deriving from ``base`` that is still alive, each once."""
    seen = set()
    pending: List[Type[Any]] = list(base.__subclasses__())
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
