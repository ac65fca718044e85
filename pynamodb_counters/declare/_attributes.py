"""
:class:`CounterField`, the attribute that holds a reference counter on a parent model.
"""
from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Dict, Iterable, List, Optional, Tuple, Type, TypeVar, Union, overload

from pynamodb.attributes import Attribute
from pynamodb.constants import NUMBER

from .._keys import key_of
from ..exceptions import ConfigurationError, CorruptCounterError
from ._counted import MAX_SHARDS, forget_specs, require_mixin

__all__ = ["CounterField"]


_C = TypeVar("_C", bound="CounterField")

_REDECLARING = frozenset(("shards", "_limit"))
"""The attributes of a :class:`CounterField` whose change at run time changes what its model's spec holds."""


class CounterField(Attribute[int]):
    """A number attribute that pynamodb-counters keeps equal to the number of a parent's children.

    It reads like any attribute (``post.like_tally`` is an ``int``, one GetItem away) and is never null: a new
    parent starts at ``0``, and a parent whose item lacks the attribute (a counter added to an existing model)
    reads ``0`` until a child is counted or a repair sets it. An audit still reports such a parent as drift
    (stored ``None``), even with no children: a repair then writes the attribute.

    A stored value that is not a whole number (written by hand, ``ADD like_tally 0.5``) is never truncated:
    reading ``post.like_tally`` raises :class:`~pynamodb_counters.exceptions.CorruptCounterError` naming the
    item, and an audit reports it as drift.

    Only counted writes change it: ``child.save()`` and ``child.delete()`` add deltas inside their transaction,
    a parent's ``save()`` never overwrites it, ``update()`` refuses actions on it, and
    :func:`pynamodb_counters.set_counter` is the explicit path for repairs.

    **Sharded** (``CounterField(shards=16)``), the counter is spread over 16 items with different partition keys
    (see :doc:`sharding`), for parents too hot for one partition. Then ``post.like_tally`` is only the
    parent item's own share (shard 0); read the total with :meth:`total` (one BatchGetItem).

    **Limited** (``CounterField(limit=50)``), a write that would take the counter past its limit is refused as a
    whole, exactly (see :doc:`limits`). The limit is a whole number, or the parent's own attribute holding it
    (``limit=max_players`` in the class body, or ``limit=lambda game: game.max_players``), read from the stored
    item in the write's condition.

    :param attr_name: the attribute name in DynamoDB, if it differs from the Python name.
    :param shards: how many items hold the counter, from 1 (the default: the parent item alone) to
      :data:`~pynamodb_counters.MAX_SHARDS`.
    :param limit: the most the counter may hold: a whole number, a number attribute of the parent, or a function
      of the parent returning one of its number attributes.
    :raises ConfigurationError: ``shards`` is not a whole number in that range, ``limit`` is not one of those,
      or a limited counter is sharded (its count must be on one item for the condition to see it).
    """

    attr_type = NUMBER
    null = False

    def __init__(self, attr_name: Optional[str] = None, *, shards: int = 1, limit: Any = None) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
            raise ConfigurationError(f"CounterField(shards={shards!r}): shards is a whole number from 1 (unsharded) "
                                     f"to {MAX_SHARDS}")
        if limit is not None and not (isinstance(limit, Attribute) or callable(limit) or (
                isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0)):
            raise ConfigurationError(f"CounterField(limit={limit!r}): a limit is a whole number of at least 0, a "
                                     f"number attribute of the parent, or a function of the parent returning one")
        if limit is not None and shards > 1:
            raise ConfigurationError(f"CounterField(shards={shards}, limit=...): a limited counter cannot be "
                                     f"sharded\nIts condition must see the whole count on one item, and a sharded "
                                     f"count is spread over {shards}.")
        super().__init__(default=0, attr_name=attr_name)
        self.model: Optional[Type[Any]] = None
        self.name: Optional[str] = None
        self.shards = shards
        self._limit = limit
        self._limit_attribute: Optional[Attribute[Any]] = None
        self._feeders: List[Any] = []  # the relations declared so far that count into it, in declaration order

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute; a counter redeclared at run time (its ``shards`` or its limit changed, as a test
        simulating a deploy does) drops its model's spec, and what was derived from it, to be built again."""
        super().__setattr__(name, value)
        if name in _REDECLARING and self.__dict__.get("model") is not None:
            if name == "_limit":
                super().__setattr__("_limit_attribute", None)
            forget_specs(self.__dict__["model"])

    def __set_name__(self, owner: Type[Any], name: str) -> None:
        super().__set_name__(owner, name)
        require_mixin(owner, f"{owner.__name__}.{name} = CounterField()")
        if self.model is not None and self.model is not owner:
            raise ConfigurationError(
                f"one CounterField cannot be shared by {self.model.__name__}.{self.name} and {owner.__name__}.{name}"
            )
        self.model = owner
        self.name = name

    @overload
    def __get__(self: _C, instance: None, owner: Any) -> _C: ...

    @overload
    def __get__(self: _C, instance: Any, owner: Any) -> int: ...

    def __get__(self: _C, instance: Any, owner: Any) -> Union[_C, int]:
        value = super().__get__(instance, owner)
        if isinstance(value, Decimal) and instance is not None and self.model is not None:
            raise CorruptCounterError.of(self.model, key_of(instance), str(self.name), value)
        return value  # type: ignore[no-any-return]

    def serialize(self, value: Any) -> str:
        """Encode an integer count as a DynamoDB number (or a stored value that is not whole, as loaded, so a
        condition can name it)."""
        if isinstance(value, Decimal):
            return str(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"a counter holds an int, not {value!r}")
        return json.dumps(value)

    def deserialize(self, value: str) -> int:
        """Decode a DynamoDB number into an ``int``; a number that is not whole is kept exactly, as a
        :class:`~decimal.Decimal`, and reading it from the instance raises
        :class:`~pynamodb_counters.exceptions.CorruptCounterError`."""
        number = Decimal(value)
        count: Any = int(number) if number == number.to_integral_value() else number
        return count  # type: ignore[no-any-return]

    def total(self, parent: Any, *, consistent_read: bool = False) -> int:
        """Read this counter's total for one parent (a model instance, a hash key value or a ``(hash, range)``
        tuple): one BatchGetItem of its shards, summed. Works on unsharded counters too (one item).

        :raises DoesNotExist: the parent model's own ``DoesNotExist``: the parent does not exist.
        """
        total: int = self._owner()._counter_totals(self, [parent], consistent_read, False).popitem()[1]
        return total

    def totals(self, parents: Iterable[Any], *, consistent_read: bool = False) -> Dict[Tuple[Any, ...], int]:
        """Read this counter's totals for many parents: BatchGetItem requests of up to 100 shard items.

        :returns: each existing parent's key (a tuple) and total; parents that do not exist are left out.
        """
        totals: Dict[Tuple[Any, ...], int] = self._owner()._counter_totals(self, parents, consistent_read, True)
        return totals

    async def atotal(self, parent: Any, *, consistent_read: bool = False) -> int:
        """:meth:`total`, awaited: the same read, sent through aiobotocore (the ``async`` extra) on the running
        event loop.

        :raises DoesNotExist: the parent model's own ``DoesNotExist``: the parent does not exist.
        """
        totals = await self._owner()._acounter_totals(self, [parent], consistent_read, False)
        total: int = totals.popitem()[1]
        return total

    async def atotals(self, parents: Iterable[Any], *, consistent_read: bool = False) -> Dict[Tuple[Any, ...], int]:
        """:meth:`totals`, awaited (see :meth:`atotal`).

        :returns: each existing parent's key (a tuple) and total; parents that do not exist are left out.
        """
        totals: Dict[Tuple[Any, ...], int] = await self._owner()._acounter_totals(self, parents, consistent_read,
                                                                                  True)
        return totals

    @property
    def limited(self) -> bool:
        """Whether the counter has a limit."""
        return self._limit is not None

    @property
    def limit(self) -> Union[None, int, Attribute[Any]]:
        """The most the counter may hold: ``None`` (no limit), a whole number, or the parent's number attribute
        that holds it (read from the stored item in each write's condition; a parent without it has no limit).

        :raises ConfigurationError: a function limit that does not return one of the parent's number attributes.
        """
        limit = self._limit
        if limit is None or isinstance(limit, int):
            return limit
        if self._limit_attribute is None:
            owner = self._owner()
            found = limit if isinstance(limit, Attribute) else limit(_AttributeFinder(owner))
            if not isinstance(found, Attribute) or found.attr_type != NUMBER or isinstance(found, CounterField) or \
                    all(found is not attribute for attribute in owner.get_attributes().values()):
                raise ConfigurationError(f"{self!r}: limit= must be one number attribute of the parent (not a "
                                         f"counter), not {found!r}\nSuch as limit=max_players in the class body, "
                                         f"or limit=lambda game: game.max_players.")
            self._limit_attribute = found
        return self._limit_attribute

    def _owner(self) -> Any:
        """The model that declares this counter: it reads totals (the declaration itself does no I/O)."""
        if self.model is None:
            raise ConfigurationError(f"{self!r} is not declared on a model class")
        return self.model

    def __repr__(self) -> str:
        owner = self.model.__name__ if self.model is not None else "?"
        return f"CounterField({owner}.{self.name})"



class _AttributeFinder:
    """Stands in for a parent: reading an attribute gives the model's attribute itself, so that a limit function
    names the attribute that holds the limit."""

    __slots__ = ("_model",)

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        attributes = self._model.get_attributes()
        if name not in attributes:
            raise AttributeError(f"{self._model.__name__} has no attribute {name!r}")
        return attributes[name]
