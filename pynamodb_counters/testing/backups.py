"""
:func:`back_up_touched_items`: moto's TransactWriteItems made to back up only the items a transaction touches,
for the served engine's benchmarks on large tables (:class:`~pynamodb_counters.testing.server.ServedMoto` with
``item_backups=True``).
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Dict, List, Tuple

__all__ = ["back_up_touched_items"]

_LOCK = threading.Lock()
_ACTIVE = {"engines": 0, "transactions": 0}
"""How many callers keep the patch on (served engines with ``item_backups=True``: a suite may run several in one
process), and how many patched transactions are running (each served engine serves one request at a time, but
two engines serve at once): moto is patched by the first caller and given back by the last, and its table copy is
a no-op while any patched transaction runs."""
_STOCK: Dict[str, Any] = {}


def back_up_touched_items() -> Callable[[], None]:
    """Make moto's TransactWriteItems back up only the items it touches, in this process; returns the undo (moto
    is given back once every caller has undone it). :class:`ServedMoto` does it with ``item_backups=True``.

    Stock moto deep-copies the *whole table* before each action of a TransactWriteItems (once per action, not
    even once per table), so that it can restore the copy if the transaction is cancelled: a 100-action
    transaction on a table of 10,000 items copies a million items. That O(actions x table) engine CPU would swamp
    what the write benchmarks measure. DynamoDB does no such thing. This keeps moto's transaction code as it is,
    makes its table copy a no-op, and instead deep-copies the items the transaction names (their state before
    it), putting them back if the transaction raises, with each table's stream as it was (moto records a stream
    record per action as it goes, and a copy of the tables took them back): the same all-or-nothing outcome, in
    O(actions).
    The engine serves one request at a time (:class:`~pynamodb_counters.testing.server.ServedMoto`), so the
    class attribute it sets for the duration of a transaction is seen by no other request.
    """
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    def transact_write_items(self: Any, transact_items: List[Dict[str, Any]]) -> Any:
        backups: Dict[Tuple[str, Any, Any], Any] = {}
        for entry in transact_items:
            kind, operation = next(iter(entry.items()))
            found = self.tables.get(operation.get("TableName"))
            if found is None:
                continue
            key = operation.get("Item") if kind == "Put" else operation.get("Key")
            if not isinstance(key, dict) or found.hash_key_attr not in key:
                continue
            hash_value = DynamoType(key[found.hash_key_attr])
            range_value = DynamoType(key[found.range_key_attr]) if found.range_key_attr in key else None
            where = (found.name, hash_value, range_value)
            if where not in backups:
                backups[where] = copy.deepcopy(found.get_item(hash_value, range_value))
        streamed = {name: len(table.stream_shard.items) for name, table in self.tables.items()
                    if table.stream_shard is not None}
        with _LOCK:
            _ACTIVE["transactions"] += 1
            if _ACTIVE["transactions"] == 1:
                Table.__deepcopy__ = lambda table_self, memo: table_self
        try:
            return _STOCK["transact_write_items"](self, transact_items)
        except BaseException:
            for name, recorded in streamed.items():  # a cancelled transaction leaves no stream record
                shard = self.tables[name].stream_shard
                if shard is not None:
                    del shard.items[recorded:]
            for (name, hash_value, range_value), item in backups.items():
                restore = self.tables[name]
                if range_value is None:
                    if item is None:
                        restore.items.pop(hash_value, None)
                    else:
                        restore.items[hash_value] = item
                elif item is None:
                    restore.items.get(hash_value, {}).pop(range_value, None)
                else:
                    restore.items[hash_value][range_value] = item
            raise
        finally:
            with _LOCK:
                _ACTIVE["transactions"] -= 1
                if _ACTIVE["transactions"] == 0:
                    del Table.__deepcopy__

    with _LOCK:
        _ACTIVE["engines"] += 1
        if _ACTIVE["engines"] == 1:
            _STOCK["transact_write_items"] = DynamoDBBackend.transact_write_items
            DynamoDBBackend.transact_write_items = transact_write_items
    undone = threading.Event()

    def undo() -> None:
        with _LOCK:
            if undone.is_set():
                return
            undone.set()
            _ACTIVE["engines"] -= 1
            if _ACTIVE["engines"] == 0:
                DynamoDBBackend.transact_write_items = _STOCK.pop("transact_write_items")

    return undo
