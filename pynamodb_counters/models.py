"""
:class:`CounterMixin`: routes a PynamoDB model's writes through counting.

Put it before ``Model`` in the bases of every parent and child model::

    class Post(CounterMixin, Model): ...
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type, Union

from pynamodb.exceptions import DeleteError, PynamoDBException, UpdateError

from ._keys import ParentKey, key_attributes, key_of
from ._write_results import WriteResult
from .declare._counted import CountedBase
from .declare._relations import Relation, check_model
from .declare._shards import is_shard_item, not_a_shard, shard_item_message
from .declare._stored_names import SHARD_COUNT
from .exceptions import (
    ConditionFailedError,
    CountedWriteError,
    CountingBypassError,
    DuplicateChildError,
    InvalidArgumentError,
    MissingChildError,
)
from .transport._async import run as arun
from .transport._calls import Steps
from .transport._sync import run
from .write._commit import Rejected, committing, policy_for
from .write._conditions import discriminator_condition, pending_fold, pending_fold_message
from .write._fetches import read_totals, stored_item, totals
from .write._items import count_of
from .write._model_steps import item_deleted, item_got, item_refreshed, item_saved, item_updated
from .write._send import RetryPolicy
from .write._shard_items import shards_created
from .write._stored import remember_stored, stored_of
from .write._writes import (
    UNSET,
    Write,
    WriteKind,
    check_token,
    counted_options,
    delete_write,
    given,
    guard_update,
    model_spec,
    refuse_options,
    save_write,
    skipped,
    update_write,
    value,
)

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action

    from .declare._attributes import CounterField

__all__ = ["CounterMixin"]

class CounterMixin(CountedBase):
    """Makes ``save()``, ``delete()``, ``update()`` and ``batch_write()`` of a PynamoDB model keep counters exact.

    On a **child** (a model with ``counted_by`` relations):

    * ``save()`` creates the child: one TransactWriteItems with the child's Put, guarded by
      ``attribute_not_exists``, and one Update per parent item adding the deltas. It returns a
      :class:`~pynamodb_counters.WriteResult`, or raises :class:`~pynamodb_counters.exceptions.DuplicateChildError`
      when the child exists (``ignore_duplicate=True`` returns a result with ``duplicate=True`` instead). An
      instance loaded from the table (or saved before) is an edit: one transaction that writes it and moves its
      counts from what the stored item counts for to what it counts for now (see :doc:`children`).
    * ``delete()`` is the mirror (``ignore_missing=True`` for a quiet no-op on an absent child). It counts off
      the parents of the *stored* child, whatever the instance holds: an instance edited in memory, or built from
      its key alone, is corrected from the stored item in the same call.
    * ``update()`` refuses actions on its key; setting what its relations read to a value is a counted update,
      and an action on those whose result is not known before sending is refused.

    On a **parent** (a model with :class:`~pynamodb_counters.CounterField` attributes), ``save()`` is an
    UpdateItem that writes every other attribute and never a counter, so likes that landed since the parent was
    loaded are kept; the instance's counters are refreshed from the stored item. With sharded counters, the first
    ``save()`` also creates the shard items (one more TransactWriteItems), and ``delete()`` is a TransactWriteItems
    that deletes them with the parent.

    ``batch_write()`` raises on both: it cannot carry guards. Inside :func:`~pynamodb_counters.skip_counting`
    all of these are plain PynamoDB calls.

    Per model, ``Meta.counter_retry`` may hold a :class:`~pynamodb_counters.RetryPolicy`.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a class (subclasses too) that would miscount, as it is made (see :doc:`modelling`).

        :raises ConfigurationError: an attribute stored under a name the library stores on items itself, or an
          inherited relation that does not say how the expiries of the class's items are counted.
        """
        super().__init_subclass__(**kwargs)
        check_model(cls, Relation)

    # -- writes: each a decision loop (``_saving``...), sent by the sync driver here and the async one in ``asave``
    def save(self, condition: Optional[Condition] = None, *args: Any, ignore_duplicate: bool = UNSET,
             retry: Optional[RetryPolicy] = UNSET, token: Optional[str] = UNSET, **kwargs: Any) -> Any:
        """Save: counted on a child, counter-preserving on a parent, plain PynamoDB otherwise.

        :param condition: a PynamoDB condition, combined with the library's guard.
        :param ignore_duplicate: on a child, treat an existing child as a quiet no-op (for idempotent
          endpoints): ``duplicate_rejected`` is still sent, and the result has ``duplicate=True``.
        :param retry: the retry policy for this write.
        :param token: the write's ``ClientRequestToken`` (default: a fresh UUID). Pass the same token when you
          retry a write whose outcome you do not know (an idempotency key from your API's caller, say): the
          library recognises its own committed write by it and reports success, not a duplicate.

        A new child's Put is create-only, so ``add_version_condition`` has nothing to add there; an edit honours it
        as PynamoDB's ``save()`` does. PynamoDB 5's positional ``settings`` is refused on counted and parent saves
        (use ``Meta.extra_headers``).
        """
        saving = self._saving(condition, args, kwargs, ignore_duplicate, retry, token)
        if isinstance(saving, _Plain):
            return super().save(condition, *args, **saving.kwargs)  # type: ignore[misc]
        return run(saving)

    async def asave(self, condition: Optional[Condition] = None, *args: Any, ignore_duplicate: bool = UNSET,
                    retry: Optional[RetryPolicy] = UNSET, token: Optional[str] = UNSET, **kwargs: Any) -> Any:
        """:meth:`save`, awaited: the same arguments, result, errors and signals, sent through aiobotocore (the
        ``async`` extra) on the running event loop."""
        saving = self._saving(condition, args, kwargs, ignore_duplicate, retry, token)
        if isinstance(saving, _Plain):
            saving = item_saved(self, condition, **saving.plain_kwargs(self, "save"))
        return await arun(saving)

    def _saving(self, condition: Optional[Condition], args: Tuple[Any, ...], kwargs: Dict[str, Any],
                ignore_duplicate: bool, retry: Optional[RetryPolicy], token: Optional[str]
                ) -> Union[_Plain, Steps[Any]]:
        """What a save is: a counted write's or a parent's decision loop, or PynamoDB's plain save."""
        model = type(self)
        spec = model_spec(model)
        if not spec.counted:  # invisible: PynamoDB refuses our options itself
            return _Plain(args, given(kwargs, ignore_duplicate=ignore_duplicate, retry=retry, token=token))
        if skipped(model):
            return _Plain(args, kwargs)
        options = counted_options(args, kwargs) if args or kwargs else {}
        write = save_write(self, condition, spec=spec, **options)  # type: ignore[arg-type]
        if write.kind is WriteKind.PARENT_SAVE:  # one UpdateItem that refreshes the instance
            refuse_options(self, "save", ignore_duplicate=ignore_duplicate, retry=retry, token=token)
            return self._parent_saved(write, options)
        return _one_committed(write, value(retry), check_token(value(token)),
                              DuplicateChildError if value(ignore_duplicate) else None)

    def delete(self, condition: Optional[Condition] = None, *args: Any, ignore_missing: bool = UNSET,
               retry: Optional[RetryPolicy] = UNSET, token: Optional[str] = UNSET, **kwargs: Any) -> Any:
        """Delete: counted on a child (``ignore_missing=True`` makes an absent child a quiet no-op); on a parent,
        PynamoDB's delete, guarded against deleting another parent's shard item or a parent whose shard totals are
        not folded in yet (a sharded parent's goes with its shard items in one transaction), refusing the counting
        options; plain PynamoDB on a model that counts nothing.

        :param retry: the retry policy for this write.
        :param token: the write's ``ClientRequestToken``. Within one call, a lost response is always recognised
          (the child is gone); across calls, only a server that honours tokens (DynamoDB, for 10 minutes)
          recognises a retried delete, so a caller retrying a delete should pass ``ignore_missing=True``.
        """
        deleting = self._deleting(condition, args, kwargs, ignore_missing, retry, token)
        if isinstance(deleting, _Plain):
            return super().delete(condition, *args, **deleting.kwargs)  # type: ignore[misc]
        return run(deleting)

    async def adelete(self, condition: Optional[Condition] = None, *args: Any, ignore_missing: bool = UNSET,
                      retry: Optional[RetryPolicy] = UNSET, token: Optional[str] = UNSET, **kwargs: Any) -> Any:
        """:meth:`delete`, awaited (see :meth:`asave`)."""
        deleting = self._deleting(condition, args, kwargs, ignore_missing, retry, token)
        if isinstance(deleting, _Plain):
            deleting = item_deleted(self, condition, **deleting.plain_kwargs(self, "delete"))
        return await arun(deleting)

    def _deleting(self, condition: Optional[Condition], args: Tuple[Any, ...], kwargs: Dict[str, Any],
                  ignore_missing: bool, retry: Optional[RetryPolicy], token: Optional[str]
                  ) -> Union[_Plain, Steps[Any]]:
        """What a delete is: a counted write's or an unsharded parent's decision loop, or PynamoDB's plain
        delete."""
        model = type(self)
        spec = model_spec(model)
        if not spec.counted:  # invisible: PynamoDB refuses our options itself
            return _Plain(args, given(kwargs, ignore_missing=ignore_missing, retry=retry, token=token))
        if skipped(model):
            return _Plain(args, kwargs)
        if not spec.relations:
            refuse_options(self, "delete", ignore_missing=ignore_missing, retry=retry, token=token)
        if not spec.relations and spec.shards == 1:
            return self._parent_deleted(condition, counted_options(args, kwargs))
        write = delete_write(self, condition, spec=spec, **counted_options(args, kwargs))  # type: ignore[arg-type]
        return _one_committed(write, value(retry), check_token(value(token)),
                              MissingChildError if value(ignore_missing) else None)

    def update(self, actions: List[Action], condition: Optional[Condition] = None, *args: Any,
               **kwargs: Any) -> Any:
        """PynamoDB's ``update()``, refusing actions that would bypass counting.

        On a counted child, actions that set what decides its counts (the attributes its relations read) to a
        value known before sending (SET to a value, REMOVE) make a counted update: one TransactWriteItems with
        the Update and the counter deltas between the stored item and the updated one, as an edit's ``save()``
        (see :doc:`children`). It returns a :class:`~pynamodb_counters.WriteResult`, and the instance then holds
        what it set (read back with one strongly consistent GetItem when other actions were not known before
        sending). Any other ``update()`` is PynamoDB's, and returns what PynamoDB's returns.

        :raises CountingBypassError: an action on a counter or on a counted child's key, or one whose result is
          not known before sending (ADD, arithmetic) on what decides a counted child's counts. Nothing is
          written.
        :raises InvalidArgumentError: no actions, or a condition that is not a PynamoDB condition.
        :raises MissingChildError: a counted child that does not exist (an update never creates one: it would not
          be counted). Nothing is written.
        """
        updating = self._updating(actions, condition, args, kwargs)
        if isinstance(updating, _Plain):
            return super().update(actions, condition, *args, **updating.kwargs)  # type: ignore[misc]
        return run(updating)

    async def aupdate(self, actions: List[Action], condition: Optional[Condition] = None, *args: Any,
                      **kwargs: Any) -> Any:
        """:meth:`update`, awaited (see :meth:`asave`)."""
        updating = self._updating(actions, condition, args, kwargs)
        if isinstance(updating, _Plain):
            updating = item_updated(self, actions, condition, **updating.plain_kwargs(self, "update"))
        return await arun(updating)

    def _updating(self, actions: List[Action], condition: Optional[Condition], args: Tuple[Any, ...],
                  kwargs: Dict[str, Any]) -> Union[_Plain, Steps[Any]]:
        """What an update is: a counted update's or a guarded child update's decision loop, or PynamoDB's plain
        update (guarded against actions that would bypass counting)."""
        model = type(self)
        spec = model_spec(model)
        uncounted = skipped(model)
        counted = spec.counted and not uncounted
        retry, token = (kwargs.pop("retry", UNSET), kwargs.pop("token", UNSET)) if counted else (UNSET, UNSET)
        if not isinstance(actions, list) or not spec.relations or uncounted:
            if isinstance(actions, list):  # anything else: PynamoDB's own TypeError
                guard_update(self, actions)  # type: ignore[arg-type]
                refuse_options(self, "update", retry=retry, token=token)
            return _Plain(args, kwargs)
        write = update_write(self, actions, condition, spec=spec,  # type: ignore[arg-type]
                             **counted_options(args, kwargs) if args or kwargs else {})
        if write.kind is not WriteKind.UPDATE:
            refuse_options(self, "update", retry=retry, token=token)
            return self._stored_updated(actions, condition, counted_options(args, kwargs))
        return self._counted_updated(write, value(retry), check_token(value(token)))

    def _counted_updated(self, write: Write, retry: Optional[RetryPolicy], chosen: str) -> Steps[WriteResult]:
        result = yield from _one_committed(write, retry, chosen, None)
        stored = stored_of(self, write.key)  # type: ignore[arg-type]  # what the commit recorded it is stored as now
        if write.unknown or stored is None:
            yield from item_refreshed(self, consistent_read=True)  # as PynamoDB's ALL_NEW would show
        else:
            for name in write.known:  # as PynamoDB's update() loads what it returns: defaults applied
                setattr(self, name, getattr(stored.view, name))
            remember_stored(self, stored.item)
        return result

    def _stored_updated(self, actions: List[Action], condition: Optional[Condition], options: Dict[str, Any]
                        ) -> Steps[Any]:
        """PynamoDB's ``update()`` of a counted child that changes nothing it counts by, guarded by the child's
        existence: an UpdateItem creates a missing item, and this one would not be counted.

        :raises MissingChildError: the child does not exist (a stale copy of a deleted child, an instance never
          saved); nothing was written.
        """
        model: Any = type(self)
        exists = key_attributes(model)[0].exists()
        try:
            return (yield from item_updated(self, actions, exists if condition is None else exists & condition,
                                            **options))
        except UpdateError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            key = key_of(self)  # type: ignore[arg-type]
            if condition is not None or model._version_attribute_name:  # the caller's condition, or the child's
                if (yield from stored_item(model, key)):
                    raise error from error.cause
            raise MissingChildError(f"{model.__name__} {key!r} does not exist; an update of a counted child never "
                                    f"creates it (it would not be counted): save() it to create and count it. "
                                    f"Nothing was written", error, model=model, key=key) from error

    # -- reads: PynamoDB's get() and refresh(), awaited ---------------------------------------------------------
    @classmethod
    async def aget(cls, hash_key: Any, range_key: Any = None, consistent_read: bool = False,
                   attributes_to_get: Optional[Sequence[str]] = None) -> Any:
        """PynamoDB's ``get()``, awaited (see :meth:`asave`): the instance remembers its stored item, as one
        ``get()`` returns.

        :raises DoesNotExist: the model's own, where there is no such item.
        """
        return await arun(item_got(cls, hash_key, range_key, consistent_read, attributes_to_get))

    async def arefresh(self, consistent_read: bool = False) -> None:
        """PynamoDB's ``refresh()``, awaited (see :meth:`asave`).

        :raises DoesNotExist: the model's own, where the item is gone.
        """
        await arun(item_refreshed(self, consistent_read))

    # -- PynamoDB's request helpers (what its TransactWrite calls) ------------------------------------------
    def get_save_kwargs_from_instance(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """PynamoDB's Put request for this item, refused on a counted model outside
        :func:`~pynamodb_counters.skip_counting`: a Put of a child would not count it, and a Put of a parent
        would overwrite its counters.

        :raises CountingBypassError: naming :class:`~pynamodb_counters.CountedTransaction`. Nothing is sent.
        """
        model = type(self)
        if model_spec(model).counted and not skipped(model):
            raise _bypass(self, "save", "a Put of a counted child would not count it, and a Put of a parent "
                                        "would overwrite its counters")
        return super().get_save_kwargs_from_instance(*args, **kwargs)  # type: ignore[misc,no-any-return]

    def get_delete_kwargs_from_instance(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """PynamoDB's Delete request for this item, refused on a counted child (it would not be uncounted) and
        on a parent with sharded counters (its shard items would be left behind), outside
        :func:`~pynamodb_counters.skip_counting`.

        :raises CountingBypassError: naming :class:`~pynamodb_counters.CountedTransaction`. Nothing is sent.
        """
        model: Any = type(self)
        spec = model_spec(model)
        if (spec.relations or spec.shards > 1) and not skipped(model):
            raise _bypass(self, "delete", "a Delete of a counted child would not uncount it, and a Delete of a "
                                          "sharded parent would leave its shard items behind")
        return super().get_delete_kwargs_from_instance(*args, **kwargs)  # type: ignore[misc,no-any-return]

    def get_update_kwargs_from_instance(self, actions: List[Action], *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """PynamoDB's Update request for this item, refusing the actions that ``update()`` refuses.

        :raises CountingBypassError: an action on a counter, or on a counted child's key or parent-deciding
          attributes. Nothing is sent.
        """
        if isinstance(actions, list):
            try:
                guard_update(self, actions)  # type: ignore[arg-type]
            except CountingBypassError as error:
                raise CountingBypassError(f"{error}. In a transaction, counted writes go through "
                                          f"pynamodb_counters.CountedTransaction, not PynamoDB's TransactWrite") \
                    from None
            model = type(self)
            if model_spec(model).relations and not skipped(model):  # never creates a child it would not count
                exists = key_attributes(model)[0].exists()  # type: ignore[arg-type]
                given = kwargs.pop("condition", args[0] if args else None)
                kwargs["condition"] = exists if given is None else exists & given
                args = args[1:]
        return super().get_update_kwargs_from_instance(actions, *args, **kwargs)  # type: ignore[misc,no-any-return]

    def _parent_deleted(self, condition: Optional[Condition], options: Dict[str, Any]) -> Steps[Any]:
        """PynamoDB's ``delete()`` of an unsharded parent, refused while it still records shard items (a counter
        whose ``shards=`` was reduced to 1, not yet folded in by ``reshard()``), which would be left behind."""
        model: Any = type(self)
        guard = pending_fold(model) & not_a_shard()
        try:
            return (yield from item_deleted(self, guard if condition is None else condition & guard, **options))
        except DeleteError as error:
            stored = yield from self._over_a_shard(error)
            if stored is None:
                raise error from error.cause
            key = key_of(self)  # type: ignore[arg-type]
            recorded = count_of(stored, SHARD_COUNT.attr_name) or 1
            if recorded > 1:
                raise ConditionFailedError(pending_fold_message(f"{model.__name__} {key!r}", recorded, 1), error,
                                           model=model, key=key) from error
            raise error from error.cause

    def _parent_saved(self, write: Write, options: Dict[str, Any]) -> Steps[Any]:
        """A parent's save: PynamoDB's UpdateItem of every attribute but its counters (which refreshes the
        instance from the stored item), never over another parent's shard item; then, for a parent with sharded
        counters that records fewer shard items than it declares, those shard items (``_shard_items``)."""
        model = type(self)
        guard = not_a_shard() if write.condition is None else not_a_shard() & write.condition
        try:
            data = yield from item_updated(self, list(write.actions), guard, **options)
        except UpdateError as error:
            yield from self._over_a_shard(error)
            raise error from error.cause
        if (count_of(data.get("Attributes"), SHARD_COUNT.attr_name) or 1) < model_spec(model).shards:
            yield from shards_created(model, [self], saved=True)  # type: ignore[arg-type]
        return data

    def _over_a_shard(self, error: PynamoDBException) -> Steps[Optional[Dict[str, Any]]]:
        """After a parent's own save or delete was refused by a condition: the stored item, read strongly
        consistently (``None`` when the refusal was not a condition's).

        :raises ConditionFailedError: the item is a shard item of another parent (see :func:`not_a_shard`).
        """
        if getattr(error, "cause_response_code", None) != "ConditionalCheckFailedException":
            return None
        model: Any = type(self)
        key = key_of(self)  # type: ignore[arg-type]
        stored = yield from stored_item(model, key)
        if is_shard_item(stored):
            raise ConditionFailedError(shard_item_message(model, key), error, model=model, key=key) from error
        return stored or {}

    # -- what the instance was loaded as (the state a counted edit or delete counts from) --------------------
    @classmethod
    def from_raw_data(cls, data: Dict[str, Any]) -> Any:
        """PynamoDB's ``from_raw_data()`` (what ``get()``, ``query()``, ``scan()`` and ``batch_get()`` build
        instances with); a counted model's instance also remembers the item it was loaded as: saving a child again
        is an edit whose counts follow the change, and a counter that differs from the loaded one was set by
        hand."""
        instance = super().from_raw_data(data)  # type: ignore[misc]
        model = type(instance)
        if model_spec(model).counted:
            remember_stored(instance, data)
        return instance

    def deserialize(self, attribute_values: Dict[str, Dict[str, Any]]) -> None:
        """PynamoDB's ``deserialize()`` (what ``refresh()`` and ``update()`` load the stored item with); a counted
        model's instance also remembers it, as :meth:`from_raw_data` does."""
        super().deserialize(attribute_values)  # type: ignore[misc]
        model = type(self)
        if model_spec(model).counted:
            remember_stored(self, attribute_values)

    @classmethod
    def _counter_totals(cls, counter: CounterField, parents: Iterable[Any], consistent_read: bool,
                        missing_ok: bool) -> Dict[ParentKey, int]:
        """What :meth:`CounterField.total() <pynamodb_counters.CounterField.total>` and ``totals()`` read."""
        return read_totals(counter, parents, consistent_read=consistent_read, missing_ok=missing_ok)

    @classmethod
    async def _acounter_totals(cls, counter: CounterField, parents: Iterable[Any], consistent_read: bool,
                               missing_ok: bool) -> Dict[ParentKey, int]:
        """What :meth:`CounterField.atotal() <pynamodb_counters.CounterField.atotal>` and ``atotals()`` read."""
        return await arun(totals(counter, parents, consistent_read=consistent_read, missing_ok=missing_ok))

    @classmethod
    def audit_filter(cls) -> Optional[Condition]:
        """The condition an item of this model's table meets when it is one of this model's items: an audit's
        Scan of a parent model visits only those. By default the discriminator of a polymorphic model, else
        ``None`` (every item). Override it where several item types share a table without a discriminator::

            @classmethod
            def audit_filter(cls):
                return cls.sk == "META"
        """
        return discriminator_condition(cls)  # type: ignore[arg-type]

    @classmethod
    def batch_write(cls, *args: Any, **kwargs: Any) -> Any:
        """PynamoDB's ``batch_write()``, refused on counted models outside
        :func:`~pynamodb_counters.skip_counting`: a BatchWriteItem cannot carry guards or counter updates.

        :raises CountingBypassError: on a model with counters or counted relations.
        """
        if model_spec(cls).counted and not skipped(cls):
            raise CountingBypassError(
                f"{cls.__name__}.batch_write() would bypass counting: BatchWriteItem cannot guard children or "
                f"update counters. Save children one by one (or in a CountedTransaction of up to 100 actions), or "
                f"wrap a deliberate backfill in skip_counting({cls.__name__}) and repair the counters afterwards")
        return super().batch_write(*args, **kwargs)  # type: ignore[misc]


class _Plain:
    """A write that is PynamoDB's own: the arguments PynamoDB's method is called with (the sync methods call it;
    the async ones send the same request, ``_model_steps``)."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs

    def plain_kwargs(self, instance: Any, write: str) -> Dict[str, Any]:
        """The keyword arguments PynamoDB's ``write`` takes on an async method: ``add_version_condition`` (any
        other is refused as PynamoDB refuses it, with a ``TypeError``; PynamoDB 5's per-call ``settings`` with an
        error naming ``Meta.extra_headers``)."""
        if self.args:
            raise InvalidArgumentError(f"{type(instance).__name__}.a{write}() takes no positional arguments after the "
                                       f"condition (PynamoDB 5's per-call settings: use Meta.extra_headers)")
        unknown = sorted(set(self.kwargs) - {"add_version_condition"})
        if unknown:
            raise TypeError(f"{write}() got an unexpected keyword argument {unknown[0]!r}")
        return self.kwargs


def _one_committed(write: Write, retry: Optional[RetryPolicy], chosen: str,
                   quiet: Optional[Type[CountedWriteError]]) -> Steps[WriteResult]:
    """Commit one counted write with the token ``chosen`` (checked), as a one-write transaction would; a refusal of
    the ``quiet`` kind (a duplicate, a missing child) is a result saying so, any other refusal is raised."""
    try:
        outcome = yield from committing([write], chosen, policy_for([write], retry))
    except MissingChildError:  # a key-only delete found no stored child to read
        if quiet is MissingChildError:
            return WriteResult(token=chosen, missing=True)
        raise
    assert outcome is not None  # see committing()
    if not isinstance(outcome, Rejected):
        return outcome.result
    if quiet is not None and isinstance(outcome.error, quiet):
        return WriteResult(token=outcome.plan.token, duplicate=quiet is DuplicateChildError,
                           missing=quiet is MissingChildError)
    outcome.raise_error()


def _bypass(instance: Any, operation: str, why: str) -> CountingBypassError:
    model = type(instance)
    return CountingBypassError(
        f"{model.__name__}.get_{operation}_kwargs_from_instance() (what PynamoDB's TransactWrite.{operation}() calls) "
        f"would bypass counting on {model.__name__} {key_of(instance)!r}: {why}. Use "
        f"pynamodb_counters.CountedTransaction (save, delete, update and condition_check, committed as one "
        f"TransactWriteItems), or skip_counting() for a deliberate backfill. Nothing was sent")
