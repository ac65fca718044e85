"""
Keys, values and the places where PynamoDB 5.5+ and 6.x differ: serializing keys and values, an item's identity
and a keyed request built by its model's PynamoDB connection, the version condition, the discriminator.

Everything else reads as if there were one PynamoDB.
"""
from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Type

import pynamodb
from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
from pynamodb.constants import ALL_OLD, BINARY, KEY, NUMBER, STRING

from .exceptions import ParentKeyError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.attributes import Attribute
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["ItemId", "ParentKey", "as_returned", "discriminator_of", "holds", "item_id",
           "key_attributes", "key_of", "key_request",
           "serialize_key", "version_condition"]

ParentKey = Tuple[Any, ...]
"""A parent's key as Python values: ``(hash,)`` or ``(hash, range)``."""

ItemId = Tuple[str, Any, Any]
"""An item's identity within a transaction: (table name, serialized hash key, serialized range key)."""

# PynamoDB 6 serializes binary values to bytes, PynamoDB 5 to base64 text
_SERIALIZED_TYPES: Dict[str, Tuple[type, ...]] = {STRING: (str,), NUMBER: (str,), BINARY: (bytes, bytearray, str)}


_BINARY_AS_BYTES = int(pynamodb.__version__.split(".")[0]) >= 6  # botocore decodes base64 from PynamoDB 6 on


def as_returned(value: Dict[str, Any]) -> Dict[str, Any]:
    """An item in DynamoDB JSON (binary values in base64 text, as a table export holds them) as its model's
    PynamoDB connection returns it, for ``from_raw_data()``: binary values as bytes on PynamoDB 6, as base64 text
    on 5."""
    if not _BINARY_AS_BYTES:
        return value
    return {name: _returned(typed) for name, typed in value.items()}


def _returned(typed: Dict[str, Any]) -> Dict[str, Any]:
    kind, raw = next(iter(typed.items()))
    if kind == BINARY and isinstance(raw, str):
        return {kind: base64.b64decode(raw)}
    if kind == "BS":
        return {kind: [base64.b64decode(each) if isinstance(each, str) else each for each in raw]}
    if kind == "M":
        return {kind: as_returned(raw)}
    if kind == "L":
        return {kind: [_returned(each) for each in raw]}
    return typed


_KEYS_HELD = "_pynamodb_counters_keys"  # on a counted model class, in its own namespace: its key attributes


def key_attributes(model: Type[Model]) -> List[Attribute[Any]]:
    """The model's hash key attribute, then its range key attribute if it has one (held on a counted model's
    class once found: a model's keys are fixed once it is built)."""
    held: Optional[List[Attribute[Any]]] = model.__dict__.get(_KEYS_HELD)
    if held is not None:
        return held
    attributes = model.get_attributes()
    hash_key, range_key = model._hash_keyname, model._range_keyname
    assert hash_key is not None
    found = [attributes[hash_key], attributes[range_key]] if range_key else [attributes[hash_key]]
    if getattr(model, "_pynamodb_counters_mixin", False):  # never on a model that is not the library's
        setattr(model, _KEYS_HELD, found)
    return found


def key_of(instance: Model) -> Tuple[Any, ...]:
    """An instance's key as Python values: ``(hash,)`` or ``(hash, range)``."""
    model = type(instance)
    hash_key = getattr(instance, model._hash_keyname)  # type: ignore[arg-type]
    return (hash_key, getattr(instance, model._range_keyname)) if model._range_keyname else (hash_key,)


def serialize_key(model: Type[Model], key: Tuple[Any, ...]) -> Tuple[Any, Optional[Any]]:
    """Serialize a ``(hash,)`` or ``(hash, range)`` key of ``model``, checking each value's type.

    :raises ParentKeyError: a value the key attribute cannot hold (``"7"`` for a number key, ``7`` for a
      string key).
    """
    serialized: List[Any] = []
    for attribute, value in zip(key_attributes(model), key):
        if type(value) is str and value and type(attribute) is UnicodeAttribute:  # serialized as it is
            serialized.append(value)
            continue
        out = _serialized(attribute, value)
        if out is None:
            raise ParentKeyError(f"{model.__name__}.{attribute.attr_name} is a {type(attribute).__name__}; "
                                 f"{value!r} ({type(value).__name__}) is not a valid key value for it")
        serialized.append(out)
    return serialized[0], (serialized[1] if len(serialized) > 1 else None)


def holds(attribute: Attribute[Any], value: Any) -> bool:
    """Whether ``attribute`` can store ``value``: it serializes it into a value of the attribute's DynamoDB type
    (a number attribute into a number, not a string)."""
    return _serialized(attribute, value) is not None


def _serialized(attribute: Attribute[Any], value: Any) -> Any:
    """``value`` serialized by ``attribute``, or ``None`` where it cannot be (it fails, or gives another type)."""
    try:
        out = attribute.serialize(value)
        if not isinstance(out, _SERIALIZED_TYPES.get(attribute.attr_type, (object,))):
            return None
        if attribute.attr_type == NUMBER:
            number = json.loads(str(out))
            if not isinstance(number, (int, float)) or isinstance(number, bool):
                return None
    except (TypeError, ValueError):
        return None
    return out


def version_condition(instance: Model, actions: Optional[List[Action]] = None,
                      attributes: Optional[Dict[str, Any]] = None) -> Optional[Condition]:
    """PynamoDB's optimistic-locking condition for ``instance`` (``None`` without a ``VersionAttribute``);
    appends the version bump to ``actions`` or ``attributes`` as PynamoDB's own writes do."""
    condition: Optional[Condition] = instance._handle_version_attribute(actions=actions, attributes=attributes)
    return condition


def discriminator_of(model: Type[Model]) -> Optional[DiscriminatorAttribute]:
    """The model's ``DiscriminatorAttribute`` in a polymorphic single-table model, else ``None``."""
    name = getattr(model, "_discriminator", None)
    attribute = model.get_attributes().get(name) if name else None
    return attribute if isinstance(attribute, DiscriminatorAttribute) else None


def item_id(model: Type[Model], key: Tuple[Any, ...]) -> ItemId:
    """The identity of an item within a transaction: its table and serialized key."""
    hash_key, range_key = serialize_key(model, key)
    return (model.Meta.table_name, hash_key, range_key)


def key_request(model: Type[Model], key: Tuple[Any, ...], **kwargs: Any) -> Dict[str, Any]:
    """A transaction action's request on the item ``key`` of ``model``, built by its PynamoDB connection; a
    refusal returns the item (``ALL_OLD``)."""
    hash_key, range_key = serialize_key(model, key)
    request: Dict[str, Any] = model._get_connection().get_operation_kwargs(
        hash_key, range_key=range_key, key=KEY, return_values_on_condition_failure=ALL_OLD, **kwargs)
    return request
