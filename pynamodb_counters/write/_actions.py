"""
The actions of a TransactWriteItems, one small class each, and a counted child's own: :class:`ChildPut`,
:class:`ChildEdit` and :class:`ChildDelete`. The others sit beside them: a parent's counter Update
(``_parent_update``), a sharded parent's shard items, the check that a rollup found gone is still absent and the
caller's writes that count nothing (``_other_actions``); a child deleted by TTL, its stream record's marker
(``_expiries``). Pure, no I/O.

Each action knows its item, builds its request (:meth:`Action.request`) and reads DynamoDB's cancellation reason
for it into the error it means (:meth:`Action.refusal`): the planner puts them together, the commit sends them
and hands each refusal back to the action it concerns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Optional, Sequence, Tuple, Type

from pynamodb.constants import ALL_OLD
from pynamodb.expressions.condition import Condition

from .._compat import ItemId, item_id, key_request, saved_version
from ..declare._base import EDIT_ID, EDITED_BY, SHARD_COUNT, WRITE_ID, CountedBase
from ..declare._shards import not_a_shard
from ..declare._spec import shard_count
from ..exceptions import (
    ConditionFailedError,
    CounterError,
    DuplicateChildError,
    InvalidArgumentError,
    MissingChildError,
    TransactionError,
)
from ._conditions import pending_fold, pending_fold_message
from ._deltas import Counting, Deltas
from ._items import count_of
from ._stored import Stored, as_loaded
from ._writes import Write, WriteKind, parent_save_actions

if TYPE_CHECKING:  # pragma: no cover
    import botocore.exceptions
    from pynamodb.models import Model

__all__ = ["CHECK_FAILED", "Action", "Cancellation", "ChildAction", "ChildDelete", "ChildEdit", "ChildPut",
           "pending_fold_refusal", "pynamodb_view"]

KEY_LIMITS = ((2048, "partition (hash) key"), (1024, "sort (range) key"))
"""DynamoDB's limits on a key's values, in bytes, with their names."""

CHECK_FAILED = "ConditionalCheckFailed"
"""The cancellation reason code of an action whose condition failed."""


@dataclass(frozen=True)
class Cancellation:
    """What DynamoDB said of one action of a cancelled transaction.

    :ivar code: its reason's code (``"ConditionalCheckFailed"``...).
    :ivar item: the item it returned (``ALL_OLD``), raw, or ``None``.
    :ivar reasons: every action's reason, as DynamoDB returned them (every error carries them).
    :ivar error: the botocore error of the cancellation.
    """

    code: Optional[str]
    item: Optional[Dict[str, Any]]
    reasons: Sequence[Dict[str, Any]]
    error: Optional[botocore.exceptions.ClientError]
    message: str = ""


class Action:
    """One action of a TransactWriteItems, on one item.

    :ivar model: the item's model.
    :ivar key: the item's key (a shard item's: its parent's, see :attr:`shard`).
    :ivar where: the item's identity in the transaction (table, serialized key).
    """

    verb: ClassVar[str] = ""
    shard: int = 0

    def __init__(self, model: Type[Model], key: Tuple[Any, ...], where: Optional[ItemId] = None) -> None:
        self.model = model
        self.key = key
        self.where = where if where is not None else item_id(model, key)

    @property
    def label(self) -> str:
        """The item, as errors name it."""
        return f"{self.model.__name__} {self.key!r}"

    def request(self, token: str) -> Dict[str, Any]:
        """The action's request, for a transaction sent with ``token``."""
        raise NotImplementedError

    def refusal(self, said: Cancellation) -> CounterError:
        """The error DynamoDB's refusal of this action means."""
        if said.code != CHECK_FAILED:
            return TransactionError(f"DynamoDB cancelled the transaction: {said.code} on {self.label}: "
                                    f"{said.message}", said.error)
        return self.failed(said)

    def failed(self, said: Cancellation) -> CounterError:
        """The error of this action's failed condition."""
        return ConditionFailedError(f"the condition on {self.label} was not met", said.error, **self.about(said))

    def own(self, said: Cancellation, token: str) -> bool:
        """Whether the refusal shows this very write committed (on an attempt whose response was lost)."""
        return False

    def about(self, said: Cancellation) -> Dict[str, Any]:
        """What every error of this action carries: the item at fault and the reasons."""
        return dict(model=self.model, key=self.key, cancellation_reasons=said.reasons)


def oversized_key(serialized: Tuple[Any, Optional[Any]]) -> Optional[str]:
    """What is wrong with a serialized key that DynamoDB would refuse as too long, or ``None``: what an action
    checks of its item when it is made."""
    for value, (limit, name) in zip(serialized, KEY_LIMITS):
        if value is None or len(value) <= limit // 4:  # at most 4 bytes a character: short enough
            continue
        size = len(value.encode("utf-8")) if isinstance(value, str) else len(value)
        if size > limit:
            return f"its {name} is {size} bytes; DynamoDB allows {limit} bytes"
    return None


def pynamodb_view(instance: Model) -> Any:
    """``instance`` as PynamoDB sees it, past :class:`~pynamodb_counters.CounterMixin`: the mixin refuses its
    request helpers to other callers (PynamoDB's ``TransactWrite``), which would bypass counting."""
    return super(CountedBase, instance) if isinstance(instance, CountedBase) else instance


def pending_fold_refusal(action: Action, said: Cancellation) -> Optional[CounterError]:
    """A delete refused because the parent still records more shards than its model declares, or ``None``."""
    recorded = count_of(said.item, SHARD_COUNT.attr_name) or 1
    if recorded > shard_count(action.model):
        return ConditionFailedError(pending_fold_message(action.label, recorded, shard_count(action.model)),
                                    said.error, **action.about(said))
    return None


# -- a counted child's own action ------------------------------------------------------------------------------
class ChildAction(Action):
    """A counted child's own Put, Update or Delete.

    :ivar index: the position of its write in the transaction.
    :ivar write: the caller's write.
    :ivar counting: what it is counted from in this attempt.
    :ivar counted: its counter changes in this attempt.
    :raises InvalidArgumentError: the child's own key is too long for DynamoDB.
    """

    relearns: ClassVar[bool] = True
    """Whether a refusal that returns the stored item teaches what the write is counted from (not for an expiry:
    it is counted from the stream's image, and its refusal returns its marker)."""

    def __init__(self, index: int, write: Write, counting: Counting, where: Optional[ItemId] = None) -> None:
        super().__init__(write.model, write.key, where)
        wrong = oversized_key(self.where[1:])
        if wrong is not None:
            raise InvalidArgumentError(f"{write.model.__name__} {str(write.key)[:80]}... cannot be stored by "
                                       f"DynamoDB: {wrong}. Nothing was written")
        self.index = index
        self.write = write
        self.counting = counting
        self.counted: Deltas = counting.deltas
        assert write.instance is not None
        self.instance: Model = write.instance

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """What the child is stored as once the action commits (``None``: deleted)."""
        return self.instance.serialize(null_check=False)

    def condition(self, basis: Stored, *others: Model) -> Condition:
        """An edit's, update's or delete's condition: the child is stored, and the attributes that decide its
        parents (read on ``basis`` as loaded or on ``others``) hold what ``basis`` holds, the stored child its
        deltas were counted from; then the caller's condition."""
        stored: Condition = self.write.spec.keys[0].exists()
        same = basis.kept(*others, spec=self.write.spec)
        if same is not None:
            stored &= same
        given = self.write.condition
        return stored if given is None else stored & given


class ChildPut(ChildAction):
    """A new child's Put: create-only (``attribute_not_exists``), carrying the write id (``_cwid``) that
    recognises its own commit, and the shard count when its shard items are created with it."""

    verb = "Put"

    def request(self, token: str) -> Dict[str, Any]:
        absent: Condition = self.write.spec.keys[0].does_not_exist()
        given = self.write.condition
        request: Dict[str, Any] = pynamodb_view(self.instance).get_save_kwargs_from_instance(
            condition=absent if given is None else absent & given, return_values_on_condition_failure=ALL_OLD)
        shards = self.write.spec.shards
        if self.write.with_shards and shards > 1:  # created in this same transaction
            request["Item"][SHARD_COUNT.attr_name] = {"N": str(shards)}
        request["Item"][WRITE_ID] = {"S": token}
        return request

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        item: Dict[str, Any] = request["Item"]
        return item

    def own(self, said: Cancellation, token: str) -> bool:
        return said.code == CHECK_FAILED and (said.item or {}).get(WRITE_ID) == {"S": token}

    def failed(self, said: Cancellation) -> CounterError:
        if said.item:
            return DuplicateChildError(f"{self.label} already exists; it was not counted again", said.error,
                                       raw_item=said.item, item=_load(self.model, said.item), **self.about(said))
        return ConditionFailedError(f"the condition on saving {self.label} was not met", said.error,
                                    **self.about(said))


class ChildEdit(ChildAction):
    """A stored child's Update: an edit saved again (every attribute as the instance holds it, its own counters
    and the library's attributes kept as stored) or a counted ``update()`` (the caller's actions), conditioned on
    the stored child its deltas were counted from, carrying the edit id (``_ceid``)."""

    verb = "Update"

    def request(self, token: str) -> Dict[str, Any]:
        basis = self.counting.basis
        assert basis is not None
        if self.write.kind is WriteKind.UPDATE:
            assert self.counting.after is not None
            request: Dict[str, Any] = pynamodb_view(self.instance).get_update_kwargs_from_instance(
                [*self.write.actions, EDITED_BY.set(token)], condition=self.condition(basis, self.counting.after.view),
                return_values_on_condition_failure=ALL_OLD, add_version_condition=self.write.add_version_condition)
            return request
        loaded = self.counting.loaded  # as decided; a plan made without deciding builds it
        condition = self.condition(basis, as_loaded(self.instance, self.write.spec) if loaded is None else loaded,
                                   self.instance)
        actions = [*parent_save_actions(self.instance, self.write.spec), EDITED_BY.set(token)]
        version = saved_version(self.instance, actions)  # as save() writes it: the local version plus one
        if version is not None and self.write.add_version_condition:
            condition &= version
        return key_request(self.model, self.key, condition=condition, actions=actions)

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if self.counting.after is not None:  # an update: its stored result, NULLs and all
            return self.counting.after.item
        return super().stored_after(request)

    def own(self, said: Cancellation, token: str) -> bool:
        return said.code == CHECK_FAILED and (said.item or {}).get(EDIT_ID) == {"S": token}

    def failed(self, said: Cancellation) -> CounterError:
        if said.item:
            verb = "updating" if self.write.kind is WriteKind.UPDATE else "saving"
            return ConditionFailedError(f"the condition on {verb} {self.label} was not met", said.error,
                                        **self.about(said))
        return ConditionFailedError(f"{self.label} was deleted since it was loaded, and kept changing; nothing was "
                                    f"written", said.error, **self.about(said))


class ChildDelete(ChildAction):
    """A counted child's Delete, conditioned on the stored child its deltas were counted from (and, for a child
    that is itself a sharded parent, on recording no more shards than its model declares)."""

    verb = "Delete"

    def request(self, token: str) -> Dict[str, Any]:
        basis = self.counting.basis
        assert basis is not None
        condition = self.condition(basis, self.instance)
        if self.write.with_shards and self.write.spec.counters:  # only the shard items it deletes with it
            condition &= pending_fold(self.model) & not_a_shard()
        request: Dict[str, Any] = pynamodb_view(self.instance).get_delete_kwargs_from_instance(
            condition=condition, return_values_on_condition_failure=ALL_OLD,
            add_version_condition=self.write.add_version_condition)
        return request

    def stored_after(self, request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return None

    def failed(self, said: Cancellation) -> CounterError:
        if said.item:
            return pending_fold_refusal(self, said) or ConditionFailedError(
                f"the condition on deleting {self.label} was not met", said.error, **self.about(said))
        return MissingChildError(f"{self.label} does not exist; no counter was decremented", said.error,
                                 **self.about(said))


def _load(model: Type[Model], item: Dict[str, Any]) -> Any:
    try:
        return model.from_raw_data(item)
    except Exception:  # the raw item is still reported
        return None
