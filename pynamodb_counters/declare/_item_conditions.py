"""
PynamoDB conditions evaluated on one raw item (DynamoDB typed JSON: ``{"pk": {"S": ...}, ...}``, as a stream
image, an export's line or a Query returns it) as DynamoDB evaluates them in a filter: what tells a model's items
from the others of its table (``_identity``), a parent model's ``audit_filter()`` read from an export. Pure, no I/O.
(A relation's ``when=`` is a function of the loaded child, not a condition: its callers call it.)

:func:`matcher` turns a PynamoDB condition into a function of a raw item, once; the function runs on every item.
It is made in two steps, :func:`compiled` (the condition as plain values, which pickle for a worker process) and
:func:`matcher_of` (the function of those values).
A condition that cannot be evaluated on an item alone (a nested path, ``size()``, a comparison of two attributes)
is refused when the matcher is made, not when it runs.
"""
from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Type

from pynamodb.expressions.condition import (
    And,
    BeginsWith,
    Between,
    Comparison,
    Condition,
    Contains,
    Exists,
    In,
    IsType,
    Not,
    NotExists,
    Or,
)
from pynamodb.expressions.operand import Path, Value

from ..exceptions import ConfigurationError, CounterError

__all__ = ["Item", "ItemRule", "compiled", "matcher", "matcher_of"]

Item = Dict[str, Any]
"""One raw item, as an export's data file holds it: ``{"pk": {"S": "POST#a91f"}, "likes": {"N": "3"}, ...}``."""


ItemRule = Tuple[Any, ...]
"""A condition compiled to plain values (:func:`compiled`), picklable: ``("and", rule, rule)``, ``("or", ...)``,
``("not", rule)``, else ``(operator, attribute name, operands)``, each operand a typed value (``("S", "META")``)."""

_OPERATORS: Tuple[Tuple[type, str], ...] = (
    (Exists, "exists"), (NotExists, "not_exists"), (IsType, "is_type"), (BeginsWith, "begins_with"),
    (Contains, "contains"), (Between, "between"), (In, "in"))


def matcher(condition: Condition, what: str, error: Type[CounterError] = ConfigurationError
            ) -> Callable[[Mapping[str, Any]], bool]:
    """A function telling whether a raw item meets ``condition`` (a PynamoDB condition), as DynamoDB would:
    :func:`matcher_of` the condition :func:`compiled`.

    :param error: what a condition this cannot evaluate raises.
    :raises CounterError: ``error``, for a condition this cannot evaluate on an item (a nested path, ``size()``),
      naming ``what``.
    """
    return matcher_of(compiled(condition, what, error))


def compiled(condition: Condition, what: str, error: Type[CounterError] = ConfigurationError) -> ItemRule:
    """``condition`` (a PynamoDB condition) as plain values, which pickle without the models or PynamoDB's
    objects: what a worker process is given to build its :func:`matcher_of`.

    :raises CounterError: as :func:`matcher`.
    """
    if isinstance(condition, (And, Or)):
        return ("and" if isinstance(condition, And) else "or",
                *(compiled(part, what, error) for part in condition.values))
    if isinstance(condition, Not):
        return "not", compiled(condition.values[0], what, error)
    name = _name(condition.values[0], what, error)
    operands = tuple(_operand(value, what, error) for value in condition.values[1:])
    operator = next((named for kind, named in _OPERATORS if isinstance(condition, kind)), None)
    if operator is None and isinstance(condition, Comparison):
        operator = condition.operator
    if operator is None:
        raise error(f"{what} is a condition ({condition}) that cannot be evaluated on an item alone here")
    return operator, name, operands


def matcher_of(rule: ItemRule) -> Callable[[Mapping[str, Any]], bool]:
    """The function of a raw item that a :func:`compiled` condition is, made once: it runs on every item."""
    if rule[0] in ("and", "or"):
        first, second = matcher_of(rule[1]), matcher_of(rule[2])
        if rule[0] == "and":
            return lambda item: first(item) and second(item)
        return lambda item: first(item) or second(item)
    if rule[0] == "not":
        inner = matcher_of(rule[1])
        return lambda item: not inner(item)
    operator, name, operands = rule
    if operator == "exists":
        return lambda item: name in item
    if operator == "not_exists":
        return lambda item: name not in item
    if operator == "is_type":
        kind = operands[0][1]
        return lambda item: name in item and next(iter(item[name])) == kind
    if operator == "begins_with":
        prefix = operands[0]
        return lambda item: _begins(_typed(item.get(name)), prefix)
    if operator == "contains":
        part = operands[0]
        return lambda item: _contains(item.get(name), part)
    if operator == "between":
        low, high = operands
        return lambda item: _compare(item.get(name), low, ">=") and _compare(item.get(name), high, "<=")
    if operator == "in":
        return lambda item: any(_compare(item.get(name), each, "=") for each in operands)
    value = operands[0]
    return lambda item: _compare(item.get(name), value, operator)


def _name(operand: Any, what: str, error: Type[CounterError]) -> str:
    if isinstance(operand, Path) and len(operand.path) == 1 and "[" not in operand.path[0]:
        return str(operand.path[0])
    raise error(f"{what} reads {operand}: only top-level attributes can be matched on an item alone")


def _operand(operand: Any, what: str, error: Type[CounterError]) -> Tuple[str, Any]:
    if isinstance(operand, Value):
        return _typed(operand.value)  # type: ignore[return-value]
    raise error(f"{what} compares with {operand}: only values can be compared on an item alone")


def _typed(value: Optional[Dict[str, Any]]) -> Optional[Tuple[str, Any]]:
    """A raw typed value as (type, comparable value): numbers as Decimal, binary as bytes, sets as frozensets."""
    if not value:
        return None
    kind, raw = next(iter(value.items()))
    if kind == "N":
        return kind, Decimal(raw)
    if kind == "B":
        return kind, base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
    if kind == "NS":
        return kind, frozenset(Decimal(each) for each in raw)
    if kind in ("SS", "BS"):
        return kind, frozenset(raw)
    return kind, raw


def _compare(stored: Optional[Dict[str, Any]], value: Tuple[str, Any], operator: str) -> bool:
    found = _typed(stored)
    if found is None or found[0] != value[0]:
        return operator == "<>" and found is not None  # DynamoDB: <> holds between values of different types
    mine, theirs = found[1], value[1]
    if operator == "=":
        return bool(mine == theirs)
    if operator == "<>":
        return bool(mine != theirs)
    if value[0] not in ("S", "N", "B"):
        return False
    return bool({"<": mine < theirs, "<=": mine <= theirs, ">": mine > theirs, ">=": mine >= theirs}[operator])


def _begins(found: Optional[Tuple[str, Any]], prefix: Tuple[str, Any]) -> bool:
    return found is not None and found[0] == prefix[0] and found[0] in ("S", "B") and found[1].startswith(prefix[1])


def _contains(stored: Optional[Dict[str, Any]], part: Tuple[str, Any]) -> bool:
    found = _typed(stored)
    if found is None:
        return False
    kind, value = found
    if kind == "S" and part[0] == "S":
        return bool(part[1] in value)
    if kind in ("SS", "NS", "BS"):
        return bool(part[1] in value)
    if kind == "L":
        return any(_typed(each) == part for each in value)
    return False
