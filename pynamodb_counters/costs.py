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

import math

__all__ = ["READ_UNIT_BYTES", "WRITE_UNIT_BYTES", "read_units", "write_units"]

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
        raise ValueError("sizes and index counts cannot be negative")
    units = max(1, math.ceil(item_bytes / WRITE_UNIT_BYTES)) * (2 if transactional else 1)
    return float(units * (1 + indexes))


def read_units(total_bytes: int, *, consistent: bool = True, transactional: bool = False) -> float:
    """Read capacity units to read ``total_bytes`` in one request (one item, or one page of a Query or Scan).

    :param consistent: strongly consistent (1 unit per 4 KB) rather than eventually consistent (half).
    :param transactional: inside TransactGetItems (twice a consistent read).
    """
    if total_bytes < 0:
        raise ValueError("sizes cannot be negative")
    units = max(1, math.ceil(total_bytes / READ_UNIT_BYTES))
    if transactional:
        return float(units * 2)
    return float(units) if consistent else units / 2
