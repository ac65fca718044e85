"""
The planner: turns counted saves and deletes (and any other PynamoDB writes) into one TransactWriteItems.

Pure request building, no I/O: :class:`CountedTransaction` collects operations, :meth:`CountedTransaction.plan`
builds the request, and :func:`pynamodb_counters.connection.send` sends it.

What a plan guarantees, before anything is sent:

* a counted child's Put carries ``attribute_not_exists`` on its key (and the caller's condition) and the
  write id; its Delete carries ``attribute_exists``;
* every parent item gets exactly one action: the deltas of all its counters, from all children, merged into one
  Update (``ADD a :x, b :y``) guarded by the parent's existence, its discriminator and, for each decrement, a
  floor of zero (lifted while a formerly sharded counter awaits its fold), and adding 1 to the parent's
  counted-write sequence (deltas that net to zero are dropped, the sequence still moves);
* a caller's ``update()`` or ``condition_check()`` on a parent that receives deltas is merged into that Update;
* a sharded counter's delta goes to the child's shard item (the parent item for shard 0), guarded by that item
  being a shard, with no floor (a shard may dip below zero once its counter is resharded; the total stays
  exact); saving a parent with sharded counters creates its shard items, deleting it deletes them;
* no item is named twice, and there are at most 100 actions.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type

from pynamodb.constants import ALL_OLD, KEY
from pynamodb.expressions.condition import Condition

from .attributes import FED_BY, MIXIN_MARKER, SEQUENCE, WRITE_ID, check_counters_unchanged, feed_entry
from .compat import discriminator_of, key_attributes, key_of, serialize_key, version_condition
from .connection import Sent, send
from .context import counting_skipped
from .costs import ITEM_LIMIT_BYTES, item_bytes
from .exceptions import (
    CountingBypassError,
    InvalidTransactionError,
    MissingChildError,
    ParentKeyError,
    ParentNotFoundError,
    TransactionError,
    TransactionTooLargeError,
)
from .outcomes import commit_plan, finish, most_fundamental, refusals, signal_refusals
from .plans import ItemId, Plan, Slot
from .relations import counters_of, relations_of
from .results import CounterChange, WriteResult
from .retries import DEFAULT_RETRY_POLICY, RetryPolicy
from .shards import SHARD, SHARD_COUNT, pending_fold, shard_count, shard_key
from .signals import missing_rejected, send_safely

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["MAX_ACTIONS", "CountedTransaction", "guard_update", "item_id", "parent_condition",
           "parent_save_actions", "shard_entries", "shard_request"]

MAX_ACTIONS = 100
"""DynamoDB's limit on actions in one TransactWriteItems."""

@dataclass
class _Pending:
    """One operation as the caller asked for it."""

    kind: str  # put | delete | update | check | counted_put | counted_delete
    model: Type[Model]
    key: Tuple[Any, ...]
    instance: Optional[Model] = None
    condition: Optional[Condition] = None
    actions: List[Action] = field(default_factory=list)
    add_version_condition: bool = True
    parent_save: bool = False
    shards: str = ""  # "Update" to create the item's own shard items with it, "Delete" to delete them with it
    changes: Tuple[CounterChange, ...] = ()  # a counted child's, computed once by the planner
    basis: Optional[Model] = None  # a counted delete's stored state, once learned (else the instance is taken)

    @property
    def counted_state(self) -> Optional[Model]:
        """What a counted child's deltas are computed from: the stored state when a read or a refusal taught
        it, else the instance as the caller holds it."""
        return self.basis if self.basis is not None else self.instance


class CountedTransaction:
    """Counted saves and deletes, and any other PynamoDB writes, committed as one TransactWriteItems.

    ::

        with CountedTransaction() as transaction:
            transaction.save(Like(pk="POST#a91f", sk="LIKE#USER#7c20", liked_at=1750636800))
            transaction.delete(old_like)
            transaction.update(post, actions=[Post.title.set("Edited")])
        transaction.result.changes

    Deltas on the same parent merge into one Update; the whole transaction commits or nothing does. Nothing is
    sent before :meth:`commit` (called when the ``with`` block ends without an exception).

    :param retry: the retry policy (defaults to the first counted model's ``Meta.counter_retry``, else
      :data:`~pynamodb_counters.retries.DEFAULT_RETRY_POLICY`).
    :param token: the ``ClientRequestToken`` (a fresh UUID by default; at most 36 characters).
    :param return_consumed_capacity: ``"TOTAL"`` (default), ``"INDEXES"`` or ``"NONE"``.
    """

    def __init__(self, *, retry: Optional[RetryPolicy] = None, token: Optional[str] = None,
                 return_consumed_capacity: str = "TOTAL") -> None:
        if token is not None and not (isinstance(token, str) and 1 <= len(token) <= 36):
            raise ValueError(f"a ClientRequestToken is a string of 1 to 36 characters, not {token!r}")
        self.token = token or str(uuid.uuid4())
        self.retry = retry
        self.return_consumed_capacity = return_consumed_capacity
        self.result: Optional[WriteResult] = None
        self._pending: List[_Pending] = []
        self._sent = False

    # -- collecting ------------------------------------------------------------------------------------------
    def save(self, instance: Model, condition: Optional[Condition] = None) -> None:
        """Add ``instance``: counted (a guarded Put plus its counter deltas) when its model is a counted child,
        otherwise an ordinary Put (a parent's counters are never overwritten: see :meth:`update`)."""
        self._check_open()
        model = type(instance)
        _check_condition(condition)
        skipped = counting_skipped(model)
        if not skipped:
            check_counters_unchanged(instance)
        counted = bool(relations_of(model)) and not skipped
        if counters_of(model) and not counted and not skipped:
            # a parent that is not a counted child: save its other attributes, never its counters
            self._pending.append(_Pending("update", model, key_of(instance), instance, condition,
                                          parent_save_actions(instance), parent_save=True, shards="Update"))
            return
        self._pending.append(_Pending("counted_put" if counted else "put", model, key_of(instance), instance,
                                      condition, shards="Update" if counted else ""))

    def delete(self, instance: Model, condition: Optional[Condition] = None, *,
               add_version_condition: bool = True) -> None:
        """Delete ``instance``: counted (a guarded Delete plus negative deltas) when its model is a counted
        child, otherwise an ordinary Delete.

        The deltas go to the parents of the stored child: the Delete is conditioned on the attributes that decide
        them holding the instance's values, and :meth:`commit` learns the stored ones from a refusal (or, for an
        instance built from its key alone, from one strongly consistent GetItem) and sends again."""
        self._check_open()
        model = type(instance)
        _check_condition(condition)
        counted = bool(relations_of(model)) and not counting_skipped(model)
        self._pending.append(_Pending("counted_delete" if counted else "delete", model, key_of(instance),
                                      instance, condition, add_version_condition=add_version_condition,
                                      shards="" if counting_skipped(model) else "Delete"))

    def update(self, instance: Model, actions: Sequence[Action], condition: Optional[Condition] = None, *,
               add_version_condition: bool = True) -> None:
        """Update ``instance`` with PynamoDB ``actions``. On a parent that also receives deltas here, the actions
        join its counter Update.

        :raises CountingBypassError: an action on a counter, on a counted child's key, or on an attribute its
          relations read to find the parent.
        """
        self._check_open()
        if not actions:
            raise TypeError("update() needs a non-empty list of actions")
        _check_condition(condition)
        guard_update(instance, actions)
        self._pending.append(_Pending("update", type(instance), key_of(instance), instance, condition,
                                      list(actions), add_version_condition))

    def condition_check(self, model: Type[Model], hash_key: Any, range_key: Any = None, *,
                        condition: Condition) -> None:
        """Require ``condition`` on an item for the transaction to commit."""
        self._check_open()
        _check_condition(condition)
        if condition is None:
            raise TypeError("condition_check() needs a condition")
        key = (hash_key,) if range_key is None else (hash_key, range_key)
        self._pending.append(_Pending("check", model, key, condition=condition))

    def __len__(self) -> int:
        return len(self._pending)

    def _check_open(self) -> None:
        if self._sent:
            raise InvalidTransactionError("this transaction was already committed (or its commit failed); a "
                                          "transaction is sent once: start a new CountedTransaction")

    # -- planning (pure) -------------------------------------------------------------------------------------
    def plan(self) -> Plan:
        """Build the request. Pure: reads the models, sends nothing.

        :raises TransactionTooLargeError: more than 100 actions.
        :raises InvalidTransactionError: an empty transaction, one item named twice, a child counted on itself.
        :raises ParentKeyError: a relation's key function gave an unusable parent key.
        """
        entries: List[Tuple[ItemId, str, Dict[str, Any], Slot]] = []
        parents: Dict[ItemId, Slot] = {}
        merged: Dict[ItemId, _Pending] = {}

        for op in self._pending:  # first pass: which parent items receive deltas
            if op.kind in ("counted_put", "counted_delete"):
                assert op.instance is not None
                sign = 1 if op.kind == "counted_put" else -1
                state = op.counted_state
                assert state is not None
                changes: List[CounterChange] = []
                for relation in relations_of(op.model):
                    for change in relation.changes(state, sign):
                        where = item_id(change.parent, shard_key(change.key, change.shard))
                        slot = parents.setdefault(where, Slot("parent", change.parent, change.key,
                                                              shard=change.shard))
                        slot.deltas[change.attribute] = slot.deltas.get(change.attribute, 0) + change.delta
                        slot.fed_by.add(feed_entry(relation))
                        changes.append(change)
                op.changes = tuple(changes)

        for op in self._pending:
            where = item_id(op.model, op.key)
            if where in parents and op.kind in ("update", "check") and not op.parent_save \
                    and where not in merged:
                merged[where] = op
                continue
            if where in parents:
                raise InvalidTransactionError(
                    f"{op.model.__name__} {op.key} is both written and counted as a parent in this transaction"
                    + (" (a child counted on itself)" if op.kind.startswith("counted") else ""))
            entries.append((where,) + _child_or_other(op, self.token))
            if op.shards and shard_count(op.model) > 1:
                entries.extend(shard_entries(op.model, op.key, op.shards))

        for where, slot in parents.items():
            action, request = _parent_request(slot, merged.get(where), where)
            entries.append((where, action, request, slot))

        seen = set()
        for where, _, _, slot in entries:
            if where in seen:
                raise InvalidTransactionError(f"{slot.model.__name__} {slot.key} appears twice in one transaction; "
                                               f"DynamoDB allows one action per item")
            seen.add(where)
        if len(entries) > MAX_ACTIONS:
            raise TransactionTooLargeError(f"this transaction has {len(entries)} actions; DynamoDB allows "
                                           f"{MAX_ACTIONS}. Nothing was sent")
        if not entries:
            raise InvalidTransactionError("this transaction is empty")
        return Plan(items=[{action: request} for _, action, request, _ in entries],
                    slots=[slot for _, _, _, slot in entries], token=self.token)

    # -- committing (I/O) ------------------------------------------------------------------------------------
    def commit(self) -> WriteResult:
        """Plan, send with retries, and report. Sends the signals of each counted child. A transaction is sent
        once: inside a ``with`` block, calling it makes the block's end commit nothing more.

        :raises CountedWriteError: a subclass naming what DynamoDB refused; nothing was written.
        :raises RetriesExhaustedError: transient failures outlasted the retry policy.
        :raises InvalidTransactionError: the transaction was already sent.
        """
        self._check_open()
        self._sent = True
        policy = self.retry_policy() or DEFAULT_RETRY_POLICY
        self._learn_key_only_deletes()
        for attempt in range(1, policy.max_attempts + 1):
            plan = self.plan()
            try:
                sent = send(plan.slots[0].model, plan.items, plan.token, policy=policy,
                            return_consumed_capacity=self.return_consumed_capacity)
            except TransactionError as error:
                raise _explain_size(plan, error) from error.cause
            refused = refusals(plan, sent) if sent.response is None else None  # None: committed
            if refused is not None:
                if attempt < policy.max_attempts and self._learn_stale_deletes(plan, sent):
                    # the refused attempt wrote nothing: again, from the stored state, as a new request
                    self.token = _next_token(self.token)
                    continue
                errors = [error for _, error in refused]
                signal_refusals(plan, errors)
                refusal = most_fundamental(errors)
                if isinstance(refusal, ParentNotFoundError) and refusal.shard and _create_missing_shards(refusal):
                    # the refused attempt wrote nothing: the same request again, now that the shards exist
                    self.result = commit_plan(plan, policy, self.return_consumed_capacity)
                    return self.result
                raise refusal
            self.result = finish(plan, sent)
            return self.result
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _learn_key_only_deletes(self) -> None:
        """A counted delete of an instance that cannot name its parents (built from its key alone) reads the
        stored child first (one strongly consistent GetItem) and counts from it.

        :raises MissingChildError: no such child (``missing_rejected`` is sent); nothing was written.
        :raises ParentKeyError: the stored child cannot name its parent either.
        """
        for op in self._pending:
            if op.kind != "counted_delete" or op.basis is not None:
                continue
            assert op.instance is not None
            if not names_parents(op.model, op.instance, -1):
                op.basis = stored_child(op.model, op.instance)

    def _learn_stale_deletes(self, plan: Plan, sent: Sent) -> bool:
        """Whether a refusal came from counted deletes whose stored children name other parents than the state
        their deltas were computed from (an instance edited in memory, or a child changed since it was loaded);
        if so, each such delete now counts from the stored child that the refusal returned."""
        learned = False
        for slot, reason in zip(plan.slots, sent.cancellation_reasons or []):
            item = reason.get("Item")
            if slot.kind != "delete" or reason.get("Code") != "ConditionalCheckFailed" or not item:
                continue
            op = next(op for op in self._pending if op.instance is slot.instance and op.kind == "counted_delete")
            state = op.counted_state
            assert state is not None
            stored = relearned(op.model, state, item)
            if stored is not None:
                op.basis = stored
                learned = True
        return learned

    def retry_policy(self) -> Optional[RetryPolicy]:
        """The retry policy this transaction uses: its own, else the first model's ``Meta.counter_retry``."""
        if self.retry is not None:
            return self.retry
        for op in self._pending:
            policy = getattr(getattr(op.model, "Meta", None), "counter_retry", None)
            if isinstance(policy, RetryPolicy):
                return policy
        return None

    def __enter__(self) -> CountedTransaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and not self._sent:  # committed once, by commit() inside the block or here
            self.commit()


def _create_missing_shards(error: ParentNotFoundError) -> bool:
    """Create the shard items of a parent stored without them (by code that predates its counter's shards, during
    a deploy); ``False`` when the parent itself is gone or nothing was missing."""
    from pynamodb.exceptions import PynamoDBException

    from .exceptions import CounterError
    from .resharding import create_shards

    assert error.model is not None
    try:
        return create_shards(error.model, [error.key]) > 0
    except (CounterError, PynamoDBException):  # the parent is gone (DoesNotExist), or kept changing
        return False


def _explain_size(plan: Plan, error: TransactionError) -> TransactionError:
    """``error``, or, when DynamoDB refused an item as too large, an error that says how much of the largest Put
    the library adds (the write id, a sharded parent's shard count), and whether the item fits without it."""
    if error.cause_response_code != "ValidationException" or "size" not in str(error).lower():
        return error
    puts = []
    for item, slot in zip(plan.items, plan.slots):
        stored = item.get("Put", {}).get("Item", {})
        own = {name: value for name, value in stored.items() if name not in _LIBRARY_ATTRIBUTES}
        if len(own) < len(stored):
            puts.append((item_bytes(stored), item_bytes(own), slot))
    if not puts:
        return error
    whole, own_bytes, slot = max(puts, key=lambda put: put[0])
    verdict = (": it fits DynamoDB's item limit without them, not with them" if whole > ITEM_LIMIT_BYTES >= own_bytes
               else "")
    return TransactionError(
        f"DynamoDB refused an item as too large. {slot.model.__name__} {slot.key!r} is {own_bytes} bytes of its own "
        f"plus {whole - own_bytes} bytes the library stores with it (its write id {WRITE_ID!r}, which recognises a "
        f"retried write){verdict}. DynamoDB allows {ITEM_LIMIT_BYTES} bytes per item, attribute names included: keep "
        f"counted items {whole - own_bytes} bytes further under it. Nothing was written ({error})", error.cause)


_LIBRARY_ATTRIBUTES = frozenset((WRITE_ID, SHARD_COUNT.attr_name))


def _next_token(token: str) -> str:
    """The token of a request sent again with other parameters (a token names one request): derived, so that
    the caller's own retry of the same call derives the same tokens."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, token))


def relearned(model: Type[Model], state: Model, item: Dict[str, Any]) -> Optional[Model]:
    """The stored child ``item`` (returned by a refused counted Delete), when it decides its parents otherwise
    than ``state``, the state the Delete's deltas were computed from; else ``None``. It keeps ``state``'s
    version, so that a ``VersionAttribute`` still refuses a stale delete."""
    stored = model.from_raw_data(item)
    if all(getattr(stored, name) == getattr(state, name) for name in _deciding(model, stored, state)):
        return None
    version = model._version_attribute_name
    if version:
        setattr(stored, version, getattr(state, version))
    return stored


def stored_child(model: Type[Model], instance: Model) -> Model:
    """The stored child with ``instance``'s key, read strongly consistently, for a delete of an instance that
    cannot name its parents (built from its key alone); it keeps ``instance``'s version.

    :raises MissingChildError: there is none (``missing_rejected`` is sent).
    """
    hash_key, range_key = serialize_key(model, key_of(instance))
    item = model._get_connection().get_item(hash_key, range_key=range_key, consistent_read=True).get("Item")
    if not item:
        error = MissingChildError(f"{model.__name__} {key_of(instance)!r} does not exist; no counter was "
                                  f"decremented", model=model, key=key_of(instance))
        send_safely(missing_rejected, model, instance=instance, error=error)
        raise error
    stored = model.from_raw_data(item)
    version = model._version_attribute_name
    if version:
        setattr(stored, version, getattr(instance, version))
    return stored


def names_parents(model: Type[Model], instance: Model, sign: int) -> bool:
    """Whether ``instance`` can name the parents of each of its relations (an instance built from its key alone
    cannot)."""
    try:
        for relation in relations_of(model):
            relation.changes(instance, sign)
    except ParentKeyError:
        return False
    return True


def _deciding(model: Type[Model], *states: Model) -> List[str]:
    """The non-key attributes that decide a counted child's parents, in any of ``states``."""
    keys = {model._hash_keyname, model._range_keyname}
    names = {name for state in states for relation in relations_of(model) for name in relation.read_attributes(state)}
    return sorted(names - keys)


def _unchanged(model: Type[Model], state: Model) -> Optional[Condition]:
    """The condition that the stored child still decides its parents as ``state`` does: each deciding
    attribute holds the value in ``state`` (or is absent, where ``state`` holds ``None``)."""
    attributes = model.get_attributes()
    condition: Optional[Condition] = None
    for name in _deciding(model, state):
        value = getattr(state, name)
        same = attributes[name].does_not_exist() if value is None else attributes[name] == value
        condition = same if condition is None else condition & same
    return condition


def parent_save_actions(instance: Model) -> List[Action]:
    """The Update actions that save a parent without touching its counters: SET (or REMOVE, for ``None``) every
    other non-key attribute, and start each counter at ``0`` only where it does not exist yet."""
    instance.serialize(null_check=True)  # the same null checks as PynamoDB's save()
    model = type(instance)
    counters = counters_of(model)
    skip = {model._hash_keyname, model._range_keyname, model._version_attribute_name}
    actions: List[Action] = []
    for name, attribute in model.get_attributes().items():
        if name in skip:
            continue
        if name in counters:
            actions.append(attribute.set(attribute | 0))
            continue
        value = getattr(instance, name)
        actions.append(attribute.remove() if value is None else attribute.set(value))
    return actions


def guard_update(instance: Model, actions: Sequence[Action]) -> None:
    """Refuse ``update()`` actions that would bypass counting: on counters, and, for a counted child, on its
    key attributes and on the attributes its relations read to find the parent (until children can move
    between parents).

    :raises CountingBypassError: naming the attribute and the way around it.
    """
    model = type(instance)
    if counting_skipped(model):
        return
    attributes = model.get_attributes()
    protected: Dict[str, str] = {attributes[name].attr_name: f"{model.__name__}.{name} is a counter"
                                 for name in counters_of(model)}
    relations = relations_of(model)
    if relations:
        for name in filter(None, (model._hash_keyname, model._range_keyname)):
            protected[attributes[name].attr_name] = f"{model.__name__}.{name} is part of a counted child's key"
        for relation in relations:
            for name in relation.read_attributes(instance):
                protected.setdefault(attributes[name].attr_name,
                                     f"{model.__name__}.{name} decides the parent of {relation}")
    for action in actions:
        for value in action.values:
            path = getattr(value, "path", None)
            if path and path[0].split("[")[0] in protected:
                raise CountingBypassError(
                    f"{protected[path[0].split('[')[0]]}: update() cannot change it without bypassing counting. "
                    f"Delete and re-create the child, use set_counter() to repair a counter, or wrap a deliberate "
                    f"migration in skip_counting()")


def _check_condition(condition: Any) -> None:
    if condition is not None and not isinstance(condition, Condition):
        raise TypeError(f"condition must be a PynamoDB condition such as Like.liked_at.exists(), not "
                        f"{condition!r}")


# -- request pieces ------------------------------------------------------------------------------------------
def item_id(model: Type[Model], key: Tuple[Any, ...]) -> ItemId:
    """The identity of an item within a transaction: its table and serialized key."""
    hash_key, range_key = serialize_key(model, key)
    return (model.Meta.table_name, hash_key, range_key)


def _child_or_other(op: _Pending, token: str) -> Tuple[str, Dict[str, Any], Slot]:
    instance, model, condition = op.instance, op.model, op.condition
    if op.kind in ("counted_put", "put"):
        assert instance is not None
        if op.kind == "counted_put":
            absent: Condition = key_attributes(model)[0].does_not_exist()
            condition = absent if condition is None else absent & condition
        request = _pynamodb(instance).get_save_kwargs_from_instance(condition=condition,
                                                         return_values_on_condition_failure=ALL_OLD)
        if op.shards and shard_count(model) > 1:  # its shard items are created in this same transaction
            request["Item"][SHARD_COUNT.attr_name] = {"N": str(shard_count(model))}
        if op.kind == "put":
            return "Put", request, Slot("other", model, op.key, instance)
        request["Item"][WRITE_ID] = {"S": token}
        return "Put", request, Slot("put", model, op.key, instance, changes=op.changes)
    if op.kind in ("counted_delete", "delete"):
        assert instance is not None
        if op.kind == "counted_delete":
            present: Condition = key_attributes(model)[0].exists()
            state = op.counted_state
            assert state is not None
            unchanged = _unchanged(model, state)
            if unchanged is not None:  # counted off the parents its deltas name, or refused and learned again
                present &= unchanged
            condition = present if condition is None else present & condition
        if op.shards and counters_of(model):  # only the shard items it deletes with it: none is left behind
            known = pending_fold(model, shard_count(model))
            condition = known if condition is None else condition & known
        request = _pynamodb(instance).get_delete_kwargs_from_instance(condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=op.add_version_condition)
        if op.kind == "delete":
            return "Delete", request, Slot("other", model, op.key, instance)
        return "Delete", request, Slot("delete", model, op.key, instance, changes=op.changes)
    if op.kind == "update":
        assert instance is not None
        actions = list(op.actions)
        if op.shards and shard_count(model) > 1:
            # created in this same transaction; a larger number recorded (a shrink not yet folded) is kept
            actions.append(SHARD_COUNT.set(SHARD_COUNT | shard_count(model)))
        request = _pynamodb(instance).get_update_kwargs_from_instance(actions, condition=condition,
                                                           return_values_on_condition_failure=ALL_OLD,
                                                           add_version_condition=op.add_version_condition)
        return "Update", request, Slot("other", model, op.key, instance)
    assert op.condition is not None
    request = _key_request(model, op.key, condition=op.condition)
    return "ConditionCheck", request, Slot("other", model, op.key)


def _pynamodb(instance: Model) -> Any:
    """``instance`` as PynamoDB sees it, past :class:`~pynamodb_counters.CounterMixin`: the mixin refuses its
    request helpers to other callers (PynamoDB's ``TransactWrite``), which would bypass counting."""
    for klass in type(instance).__mro__:
        if MIXIN_MARKER in vars(klass):
            return super(klass, instance)
    return instance


def shard_entries(model: Type[Model], key: Tuple[Any, ...], action: str) -> List[Tuple[ItemId, str, Dict[str, Any],
                                                                                         Slot]]:
    """The actions that create (``action="Update"``) or delete (``"Delete"``) a parent's shard items ``1`` and up,
    as plan entries; none for a model without sharded counters."""
    entries = []
    for shard in range(1, shard_count(model)):
        target = shard_key(key, shard)
        where = item_id(model, target)
        kwargs: Dict[str, Any] = {"actions": [SHARD.set(shard)]} if action == "Update" else {}
        request = _serialized_key_request(model, where[1], where[2], **kwargs)
        entries.append((where, action, request, Slot("shard", model, key, shard=shard)))
    return entries


def shard_request(model: Type[Model], key: Tuple[Any, ...], shard: int, **kwargs: Any) -> Dict[str, Any]:
    """A transaction action's request on shard ``shard`` of the parent ``key`` (the parent item for ``0``)."""
    return _key_request(model, shard_key(key, shard), **kwargs)


def parent_condition(model: Type[Model]) -> Condition:
    """The condition that a parent item exists and, in a polymorphic model, holds ``model``."""
    condition: Condition = key_attributes(model)[0].exists()
    discriminator = discriminator_condition(model)
    return condition if discriminator is None else condition & discriminator


def _parent_request(slot: Slot, merged: Optional[_Pending], where: ItemId) -> Tuple[str, Dict[str, Any]]:
    model = slot.model
    attributes = model.get_attributes()
    condition = SHARD.exists() if slot.shard else parent_condition(model)  # a shard: one its parent's save created
    actions: List[Action] = [SEQUENCE.add(1)]
    fed_by = slot.fed_by
    if fed_by:  # which relations fed each counter changed here: an audit that cannot see one refuses the parent
        actions.append(FED_BY.add(set(fed_by)))
    for name, delta in slot.deltas.items():
        if delta:
            actions.insert(-1 - bool(fed_by), attributes[name].add(delta))
        if delta < 0 and counters_of(model)[name].shards == 1:
            # the floor of zero, lifted while the parent records shards its model no longer declares: until
            # reshard() folds them in, the parent item holds only part of a formerly sharded counter
            condition &= (attributes[name] >= -delta) | (SHARD_COUNT > shard_count(model))
    if merged is not None:
        if merged.condition is not None:
            condition &= merged.condition
        extra = list(merged.actions)
        if merged.instance is not None and merged.add_version_condition:
            version = version_condition(merged.instance, actions=extra)
            if version is not None:
                condition &= version
        actions = extra + actions
    return "Update", _serialized_key_request(model, where[1], where[2], condition=condition, actions=actions)


def _key_request(model: Type[Model], key: Tuple[Any, ...], **kwargs: Any) -> Dict[str, Any]:
    hash_key, range_key = serialize_key(model, key)
    return _serialized_key_request(model, hash_key, range_key, **kwargs)


def _serialized_key_request(model: Type[Model], hash_key: Any, range_key: Any, **kwargs: Any) -> Dict[str, Any]:
    request: Dict[str, Any] = model._get_connection().get_operation_kwargs(
        hash_key, range_key=range_key, key=KEY, return_values_on_condition_failure=ALL_OLD, **kwargs)
    return request


def discriminator_condition(model: Type[Model]) -> Optional[Condition]:
    """In a single-table (polymorphic) model, the condition that an item holds ``model`` or a subclass."""
    attribute = discriminator_of(model)
    classes = attribute.get_registered_subclasses(model) if attribute is not None else []
    return attribute.is_in(*classes) if attribute is not None and classes else None
