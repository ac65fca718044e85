"""
The actions of a TransactWriteItems besides a counted child's and its parents' Updates: a sharded parent's
:class:`ShardItem`, the :class:`RollupCheck` that a rollup found gone is still absent, and the caller's own writes
that count nothing (:class:`Passthrough`). Pure, no I/O.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Type

from pynamodb.constants import ALL_OLD
from pynamodb.expressions.condition import Condition

from .._compat import ItemId, item_id, key_request, serialized_key_request
from ..declare._base import SHARD, SHARD_COUNT
from ..declare._shards import (
    foreign_shard_message,
    is_shard_item,
    not_a_shard,
    shard_item_message,
    shard_key,
    shard_or_absent,
)
from ..declare._spec import spec_of
from ..exceptions import ConditionFailedError, CounterError, MissingChildError
from ._actions import Action, Cancellation, pending_fold_refusal, pynamodb_view
from ._conditions import pending_fold
from ._context import counting_skipped
from ._writes import Write, WriteKind

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["Passthrough", "RollupCheck", "ShardItem", "shard_items"]

class ShardItem(Action):
    """The creation (an Update setting ``_cshard``) or the deletion of one of a parent's shard items ``1`` and
    up, with the parent, guarded by its key holding nothing or a shard item: never another item."""

    def __init__(self, model: Type[Model], key: Tuple[Any, ...], shard: int, create: bool) -> None:
        super().__init__(model, key, item_id(model, shard_key(key, shard)))
        self.shard = shard
        self.create = create
        self.verb = "Update" if create else "Delete"  # type: ignore[misc]

    def request(self, token: str) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {"actions": [SHARD.set(self.shard)]} if self.create else {}
        return serialized_key_request(self.model, self.where[1], self.where[2],
                                      condition=shard_or_absent(self.model), **kwargs)

    def failed(self, said: Cancellation) -> CounterError:
        if said.item and not is_shard_item(said.item):
            return ConditionFailedError(foreign_shard_message(self.model, self.key, self.shard), said.error,
                                        **self.about(said))
        return super().failed(said)


def shard_items(model: Type[Model], key: Tuple[Any, ...], create: bool, shards: int) -> List[ShardItem]:
    """A sharded parent's shard items ``1`` and up to ``shards`` (its model's
    :attr:`~pynamodb_counters.declare._spec.ModelSpec.shards`), created or deleted with it."""
    return [ShardItem(model, key, shard, create) for shard in range(1, shards)]


class RollupCheck(Action):
    """The check that a rollup found gone is still absent, sent with a write that leaves out what the child
    counted in it: created again since (by a first count), it counts the child after all, and the refusal says
    so."""

    verb = "ConditionCheck"

    def request(self, token: str) -> Dict[str, Any]:
        return key_request(self.model, self.key, condition=spec_of(self.model).keys[0].does_not_exist())

    def failed(self, said: Cancellation) -> CounterError:
        return ConditionFailedError(f"rollup {self.label}, found gone, kept being created again while a delete "
                                    f"counted off it was sent; nothing was written", said.error, **self.about(said))


class Passthrough(Action):
    """A write of the caller's that counts nothing, as PynamoDB builds it: a Put, a parent's save (an Update of
    every attribute but its counters, never over another parent's shard item), an Update (of a counted child:
    only if it exists, since it would not be counted if created), a Delete, a ConditionCheck."""

    _VERBS = {WriteKind.PUT: "Put", WriteKind.PARENT_SAVE: "Update", WriteKind.OTHER_UPDATE: "Update",
              WriteKind.OTHER_DELETE: "Delete", WriteKind.CHECK: "ConditionCheck"}

    def __init__(self, write: Write, where: Optional[ItemId] = None) -> None:
        super().__init__(write.model, write.key, where)
        self.write = write
        self.verb = self._VERBS[write.kind]  # type: ignore[misc]
        self.must_exist = write.kind is WriteKind.OTHER_UPDATE and bool(write.spec.relations) and \
            not counting_skipped(write.model)

    def request(self, token: str) -> Dict[str, Any]:
        write, instance = self.write, self.write.instance
        condition = write.condition
        if write.kind is WriteKind.CHECK:
            assert condition is not None
            return key_request(self.model, self.key, condition=condition)
        assert instance is not None
        view = pynamodb_view(instance)
        if write.kind is WriteKind.PUT:
            request: Dict[str, Any] = view.get_save_kwargs_from_instance(
                condition=condition, return_values_on_condition_failure=ALL_OLD)
            return request
        if write.kind is WriteKind.OTHER_DELETE:
            if write.with_shards and write.spec.counters:  # none of its shard items is left behind, and it
                guard = pending_fold(self.model) & not_a_shard()  # is never another parent's shard item
                condition = guard if condition is None else condition & guard
            request = view.get_delete_kwargs_from_instance(condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=write.add_version_condition)
            return request
        actions = list(write.actions)
        if write.kind is WriteKind.PARENT_SAVE:
            condition = not_a_shard() if condition is None else not_a_shard() & condition
            if write.with_shards and write.spec.shards > 1:
                # created in this same transaction; a larger number recorded (a shrink not yet folded) is kept
                actions.append(SHARD_COUNT.set(SHARD_COUNT | write.spec.shards))
        if self.must_exist:
            exists: Condition = write.spec.keys[0].exists()
            condition = exists if condition is None else exists & condition
        request = view.get_update_kwargs_from_instance(actions, condition=condition,
                                                       return_values_on_condition_failure=ALL_OLD,
                                                       add_version_condition=write.add_version_condition)
        return request

    def failed(self, said: Cancellation) -> CounterError:
        if self.write.spec.counters and is_shard_item(said.item):
            return ConditionFailedError(shard_item_message(self.model, self.key), said.error, **self.about(said))
        if self.must_exist and not said.item:
            return MissingChildError(f"{self.label} does not exist; an update of a counted child never creates it "
                                     f"(it would not be counted): save() it to create and count it. Nothing was "
                                     f"written", said.error, **self.about(said))
        if self.write.kind is WriteKind.OTHER_DELETE and self.write.instance is not None and said.item:
            pending = pending_fold_refusal(self, said)
            if pending is not None:
                return pending
        return super().failed(said)
