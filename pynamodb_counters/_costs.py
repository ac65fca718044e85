"""
The capacity cost model: what DynamoDB bills for an item of a given size.

Used where the server reports no ``ConsumedCapacity`` (moto, or a caller who asked for none), and documented so
you can plan a table. Rules (on-demand and provisioned alike):

* a write unit covers 1 KB, rounded up per item; a transactional write costs twice; each global secondary index
  the item is projected into costs its own write units;
* a read unit covers 4 KB, rounded up per request for GetItem and per page of items for Query and Scan (the sizes
  of all items read, whether returned, filtered out or only counted); an eventually consistent read costs half;
  a transactional read costs twice.
"""
from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Dict

from .exceptions import InvalidArgumentError

__all__ = ["ITEM_LIMIT_BYTES", "READ_UNIT_BYTES", "WRITE_UNIT_BYTES", "item_bytes", "read_units", "write_units"]

ITEM_LIMIT_BYTES = 400 * 1024
"""DynamoDB's largest item: 400 KB, attribute names included."""

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096


def write_units(item_bytes: int, *, transactional: bool = False, indexes: int = 0) -> float:
    """Write capacity units to write one item of ``item_bytes``.

    :param transactional: inside TransactWriteItems (twice the units).
    :param indexes: how many global secondary indexes the item is projected into (each adds its own units;
      assumes the whole item is projected).

    ``write_units(200, transactional=True) * 2`` is a like: a child Put and a parent Update, about 4 WCU.
    """
    if item_bytes < 0 or indexes < 0:
        raise InvalidArgumentError("sizes and index counts cannot be negative")
    units = max(1, math.ceil(item_bytes / WRITE_UNIT_BYTES)) * (2 if transactional else 1)
    return float(units * (1 + indexes))


def read_units(total_bytes: int, *, consistent: bool = True, transactional: bool = False) -> float:
    """Read capacity units to read ``total_bytes`` in one request (one item, or one page of a Query or Scan).

    :param consistent: strongly consistent (1 unit per 4 KB) rather than eventually consistent (half).
    :param transactional: inside TransactGetItems (twice a consistent read).
    """
    if total_bytes < 0:
        raise InvalidArgumentError("sizes cannot be negative")
    units = max(1, math.ceil(total_bytes / READ_UNIT_BYTES))
    if transactional:
        return float(units * 2)
    return float(units) if consistent else units / 2


def item_bytes(item: Dict[str, Any]) -> int:
    """The size DynamoDB counts for a serialized item (``{"name": {"S": "..."}}``): each attribute's name plus its
    value, by DynamoDB's documented rules (strings and binaries by their bytes, numbers about one byte per two
    significant digits plus one, 1 byte for a boolean or null, 3 bytes of overhead per list or map)."""
    return sum(len(name.encode("utf-8")) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: Dict[str, Any]) -> int:
    kind, raw = next(iter(value.items()))
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "N":
        digits = raw.lstrip("-+").replace(".", "").split("e")[0].split("E")[0].strip("0")
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(_binary(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_bytes({kind[0]: element}) for element in raw)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(element) for element in raw)
    if kind == "M":
        return 3 + item_bytes(raw) + len(raw)
    raise InvalidArgumentError(f"not a DynamoDB attribute value: {value!r}")


def _binary(raw: Any) -> bytes:
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    try:  # PynamoDB 5 sends binaries base64-encoded
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return str(raw).encode("utf-8")
