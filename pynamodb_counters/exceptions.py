"""
Exceptions raised by pynamodb-counters.

Every error derives from :class:`CounterError`. The hierarchy::

    CounterError
     +-- ConfigurationError        a declaration is wrong (raised at class definition or first use)
     |    +-- AmbiguousItemError       a stream record's item fits two models given together
     +-- InvalidArgumentError      an argument of a call is wrong; also a ValueError and a TypeError
     +-- ParentKeyError            a relation's key function gave a key the parent model cannot use
     +-- ChildValueError           a relation's when= or amount= function failed, or gave a non-bool / non-int
     +-- CountingBypassError       the call would change children or counters without counting them
     +-- CorruptCounterError       a counter holds a number that is not whole (written by hand); reads refuse it
     +-- InvalidTransactionError   a transaction DynamoDB would refuse: empty, one item twice, a child
     |    |                        counted on itself
     |    +-- TransactionTooLargeError  more than 100 actions
     +-- CountedWriteError         DynamoDB refused a counted write; nothing was written. Also PynamoDB's
     |    |                        TransactWriteError (so a PynamoDBException)
     |    +-- DuplicateChildError      the child already exists
     |    +-- MissingChildError        the child to delete does not exist
     |    +-- ParentNotFoundError      the parent item does not exist (or is another model)
     |    +-- CounterUnderflowError    the decrement would take the counter below zero
     |    +-- LimitExceededError       the increment would take a limited counter past its limit
     |    +-- ConditionFailedError     the caller's ``condition`` or version check failed, or the stored item
     |                                 kept changing through the retries (see the message)
     +-- TransactionError          DynamoDB rejected the request for another reason (validation, table missing,
     |    |                        access denied); nothing was written
     |    +-- IdempotencyMismatchError  the token was already used, within 10 minutes, for another request
     +-- RetriesExhaustedError     transient failures outlasted the retry bound; ``ambiguous`` tells
     |                             whether the write may have landed
     +-- BulkWriteError            a bulk write stopped on an unexpected error; ``result`` says what committed
     +-- ExportError               a table export cannot be read as DynamoDB writes it; nothing was reported

A refused counted write is caught like a refused PynamoDB ``TransactWrite``: ``except TransactWriteError as e``,
then ``e.cancellation_reasons`` (PynamoDB's typed reasons) and ``e.cause_response_code``.

Every error raised before a request is sent (configuration, argument, key, bypass, size) leaves DynamoDB
untouched.
"""
from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type, Union

from pynamodb.exceptions import CancellationReason, TransactWriteError

from ._cancellations import cancellation_reason

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = [
    "AmbiguousItemError",
    "BulkWriteError",
    "ChildValueError",
    "ConditionFailedError",
    "ConfigurationError",
    "ConfigurationWarning",
    "CountedWriteError",
    "CounterError",
    "CounterUnderflowError",
    "CorruptCounterError",
    "CountingBypassError",
    "DuplicateChildError",
    "ExportError",
    "IdempotencyMismatchError",
    "InvalidArgumentError",
    "InvalidTransactionError",
    "MissingExtraError",
    "LimitExceededError",
    "MissingChildError",
    "ParentKeyError",
    "ParentNotFoundError",
    "RetriesExhaustedError",
    "TransactionError",
    "TransactionTooLargeError",
]


class CounterError(Exception):
    """Base class of every pynamodb-counters error.

    Like PynamoDB's errors, each class has a default :attr:`msg` and keeps the underlying exception in
    :attr:`cause`.

    :ivar msg: the message given, else the class's default.
    :ivar cause: the underlying exception, or ``None``.
    """

    msg = "pynamodb-counters error"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None) -> None:
        self.msg = msg if msg is not None else self.msg
        # Exception's __init__, or, on a CountedWriteError, PynamoDB's (which sets msg, and cause to None)
        super().__init__(self.msg)
        self.cause = cause

    @property
    def cause_response_code(self) -> Optional[str]:
        """The DynamoDB error code of :attr:`cause` (``"TransactionCanceledException"``,
        ``"ValidationException"``...), if it was an AWS error: a botocore ``ClientError``, or a PynamoDB error
        wrapping one."""
        return self._cause_error_field("Code", "cause_response_code")

    @property
    def cause_response_message(self) -> Optional[str]:
        """The message DynamoDB gave with :attr:`cause_response_code`, found the same way."""
        return self._cause_error_field("Message", "cause_response_message")

    def _cause_error_field(self, field: str, wrapped: str) -> Optional[str]:
        """``field`` of the ``Error`` of :attr:`cause`'s response (a botocore ``ClientError``), else the
        attribute ``wrapped`` of :attr:`cause` (a PynamoDB error, or one of ours, wrapping a botocore one)."""
        response = getattr(self.cause, "response", None)
        if isinstance(response, dict):
            error = response.get("Error")
            value = error.get(field) if isinstance(error, dict) else None
        else:
            value = getattr(self.cause, wrapped, None)
        return value if isinstance(value, str) else None


class ConfigurationError(CounterError):
    """A ``CounterField`` or ``counted_by`` declaration cannot work."""

    msg = "invalid counter configuration"


class MissingExtraError(ConfigurationError, ImportError):
    """A call needs an optional extra that is not installed (the async methods need ``async``: aiobotocore); the
    message names the install command."""


class AmbiguousItemError(ConfigurationError):
    """A stream record's item fits two of the models given to a handler together (their declarations leave it to
    both: see "Which model an item is" on the :doc:`stream-counting` page). The batch stops at that record, nothing
    written for it or the records after it, with this error as the result's ``error``: an item is counted as one
    model's, never guessed. Tell the models apart (a ``prefix=``, a non-null attribute, a discriminator) and the
    record is counted when Lambda delivers it again."""

    msg = "an item fits two models"


class ConfigurationWarning(UserWarning):
    """A declaration that works only if something outside the code is set up as it says: a relation counted from
    the stream (``counting="stream"``, ``expiries="stream"``) on a model whose ``Meta.stream_view_type`` does not
    give the stream the images the handlers read. The message names the fix."""


class InvalidArgumentError(CounterError, ValueError, TypeError):
    """An argument of a call is wrong (a ``token`` that is not a string of 1 to 36 characters, a ``condition``
    that is not a PynamoDB condition, a negative size...); nothing was sent.

    It is also a :exc:`ValueError` and a :exc:`TypeError`, so code written for the plain Python errors these
    arguments raised before (``except ValueError``, ``except TypeError``) still catches it.
    """

    msg = "invalid argument"


class ParentKeyError(CounterError):
    """A relation's key function returned a value that is not a key of the parent model."""

    msg = "invalid parent key"


class ChildValueError(CounterError):
    """A relation's ``when=`` or ``amount=`` function failed on a child, or returned what it cannot use:
    ``when=`` a value that is not ``True`` or ``False``, ``amount=`` a value that is not an ``int``. Raised before
    anything is sent."""

    msg = "invalid child value"


class CountingBypassError(CounterError):
    """The call would change counted children or counters behind the library's back.

    Raised by ``batch_write()`` on counted models, by ``update()`` actions on key attributes or on counters, and
    by saving a counter that was set by hand. Use :func:`pynamodb_counters.skip_counting` for deliberate
    backfills, and :func:`pynamodb_counters.set_counter` to repair a counter.
    """

    msg = "this write would bypass counting"


class InvalidTransactionError(CounterError):
    """The transaction is one DynamoDB would refuse (empty, one item named twice, a child counted on itself);
    nothing was sent."""

    msg = "invalid transaction"


class TransactionTooLargeError(InvalidTransactionError):
    """The transaction has more than 100 actions; nothing was sent."""

    msg = "transaction too large"


# PynamoDB types ``cause`` as an Exception; ours takes any BaseException (the constructor is unchanged)
class CountedWriteError(CounterError, TransactWriteError):  # type: ignore[misc]
    """DynamoDB cancelled a counted write; nothing was written.

    It is also PynamoDB's :exc:`~pynamodb.exceptions.TransactWriteError` (so a
    :exc:`~pynamodb.exceptions.PynamoDBException`): ``except TransactWriteError`` catches a refused counted write as
    it catches a refused ``TransactWrite``, with the same :attr:`cancellation_reasons` and
    :attr:`~CounterError.cause_response_code`.

    :ivar model: the model class of the item at fault.
    :ivar key: that item's key as a tuple of Python values ``(hash,)`` or ``(hash, range)``.
    :ivar raw_cancellation_reasons: the ``CancellationReasons`` of the final attempt as DynamoDB returned them, one
      dict per action (``{"Code": ..., "Message": ..., "Item": {...}}``); empty when the refusal was not a
      cancelled transaction (:func:`~pynamodb_counters.set_counter`'s ``UpdateItem``).
    """

    msg = "counted write refused"

    def __init__(
        self,
        msg: Optional[str] = None,
        cause: Optional[BaseException] = None,
        *,
        model: Optional[Type[Model]] = None,
        key: Tuple[Any, ...] = (),
        cancellation_reasons: Sequence[Dict[str, Any]] = (),
    ) -> None:
        super().__init__(msg, cause)
        self.model = model
        self.key = key
        self.raw_cancellation_reasons: List[Dict[str, Any]] = list(cancellation_reasons)
        self._cancellation_reasons: Optional[List[Optional[CancellationReason]]] = None  # built when first read

    @property
    def cancellation_reasons(self) -> List[Optional[CancellationReason]]:
        """The reasons of :attr:`raw_cancellation_reasons` as PynamoDB's
        :class:`~pynamodb.exceptions.CancellationReason`, as ``TransactWriteError.cancellation_reasons`` lists
        them: one per action, in request order, ``None`` for an action DynamoDB did not object to (code
        ``"None"``), otherwise with ``code``, ``message`` and ``raw_item`` (the item DynamoDB returned, raw, or
        ``None``).

        ``raw_item`` is there on PynamoDB 5.5 too, whose class has no such field (it is set on each object, and its
        ``==`` ignores it).
        """
        if self._cancellation_reasons is None:  # a refusal the pipeline recovers from is never read
            self._cancellation_reasons = [cancellation_reason(raw) for raw in self.raw_cancellation_reasons]
        return self._cancellation_reasons


class DuplicateChildError(CountedWriteError):
    """The child already exists, so it was not counted again.

    :ivar raw_item: the stored item as DynamoDB returned it (``ReturnValuesOnConditionCheckFailure``).
    :ivar item: the stored item as a model instance, when it could be deserialized.
    """

    msg = "child already exists"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None, *,
                 raw_item: Optional[Dict[str, Any]] = None, item: Optional[Model] = None, **kwargs: Any) -> None:
        super().__init__(msg, cause, **kwargs)
        self.raw_item = raw_item
        self.item = item


class MissingChildError(CountedWriteError):
    """The child to delete does not exist, so no counter was decremented."""

    msg = "child does not exist"


class ParentNotFoundError(CountedWriteError):
    """The parent item does not exist (or, in a single-table model, holds another model), or one of its shard
    items does not.

    :ivar shard: the missing shard item's index; ``0`` when the parent item itself is missing.
    """

    msg = "parent not found"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None, *, shard: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(msg, cause, **kwargs)
        self.shard = shard


class CounterUnderflowError(CountedWriteError):
    """The decrement would take a counter below zero: the counter has drifted and needs a repair.

    :ivar attribute: the counter's attribute name.
    :ivar stored: the value DynamoDB holds (``None`` when the attribute is missing; a ``Decimal`` when it is not a
      whole number, written outside the library).
    """

    msg = "counter would go below zero"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None, *,
                 attribute: str = "", stored: Union[None, int, Decimal] = None, **kwargs: Any) -> None:
        super().__init__(msg, cause, **kwargs)
        self.attribute = attribute
        self.stored = stored


class LimitExceededError(CountedWriteError):
    """The increment would take a limited counter past its limit (``CounterField(limit=...)``); nothing was
    written.

    :ivar attribute: the counter's Python attribute name.
    :ivar limit: the limit, as the condition saw it (read from the stored parent where the parent holds it).
    :ivar stored: the count the parent held.
    """

    msg = "counter limit reached"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None, *,
                 attribute: str = "", limit: Any = None, stored: Any = None, **kwargs: Any) -> None:
        super().__init__(msg, cause, **kwargs)
        self.attribute = attribute
        self.limit = limit
        self.stored = stored


class ConditionFailedError(CountedWriteError):
    """The caller's ``condition`` (or a version check) was not met; or the stored state a write counts from kept
    changing through its retries (an edited child deleted and changed again, a rollup found gone and created
    again, a delete waiting for a shard fold): the message says which."""

    msg = "condition not met"


class TransactionError(CounterError):
    """DynamoDB rejected the transaction for a reason that retrying cannot fix; nothing was written."""

    msg = "transaction rejected"


class IdempotencyMismatchError(TransactionError):
    """DynamoDB already saw this ``ClientRequestToken`` within the last 10 minutes, for a request with other
    parameters (``IdempotentParameterMismatchException``); nothing was written.

    An idempotency key reused for a different write: if an API's client retries, it must send the same values
    (a client-side timestamp, not one the server fills in)."""

    msg = "token reused for another request"


class RetriesExhaustedError(CounterError):
    """Transient failures (conflicts, throttling, 5xx, connection errors) outlasted the retry bound.

    :ivar attempts: how many requests were made.
    :ivar ambiguous: ``True`` when some attempt may have committed (a lost response). The counters stay exact
      either way: retrying the same write later is safe.
    :ivar token: the write's ``ClientRequestToken``. Retry a save with ``save(token=error.token)`` and a write
      that did land is recognised as yours instead of reported as a duplicate.
    """

    msg = "retries exhausted"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None, *,
                 attempts: int = 0, ambiguous: bool = False, token: Optional[str] = None) -> None:
        super().__init__(msg, cause)
        self.attempts = attempts
        self.ambiguous = ambiguous
        self.token = token


class CorruptCounterError(CounterError):
    """A counter holds a number that is not a whole number (written by hand, outside the library, for example
    ``ADD like_tally 0.5``). Reading it (:meth:`~pynamodb_counters.CounterField.total`, ``post.like_tally``)
    raises this rather than truncating it; an audit reports it as drift and a repair fixes it.

    :ivar model: the model class of the item.
    :ivar key: the item's key as a tuple of Python values ``(hash,)`` or ``(hash, range)``.
    :ivar attribute: the counter's Python attribute name.
    :ivar stored: the value DynamoDB holds, exactly (a :class:`~decimal.Decimal`).
    """

    msg = "counter holds a number that is not whole"

    def __init__(self, msg: Optional[str] = None, cause: Optional[BaseException] = None, *,
                 model: Optional[Type[Model]] = None, key: Tuple[Any, ...] = (), attribute: str = "",
                 stored: Any = None) -> None:
        super().__init__(msg, cause)
        self.model = model
        self.key = key
        self.attribute = attribute
        self.stored = stored

    @classmethod
    def of(cls, model: Type[Model], key: Tuple[Any, ...], attribute: str, stored: Any) -> CorruptCounterError:
        """The error for ``model``'s item ``key``, whose counter ``attribute`` holds ``stored``."""
        return cls(f"{model.__name__} {key!r}: {attribute} holds {stored}, which is not a whole number (written "
                   f"outside the library?). Audit and repair it (pynamodb_counters.reconcile, or the "
                   f"pynamodb-counters command), or set it with set_counter()",
                   model=model, key=key, attribute=attribute, stored=stored)


class BulkWriteError(CounterError):
    """:func:`~pynamodb_counters.bulk_write` stopped on an unexpected error (not a
    :class:`~pynamodb_counters.exceptions.CounterError`: a bug in a botocore hook, a programming error) after
    sending had begun. The error itself is :attr:`~CounterError.cause` (and ``__cause__``).

    :ivar result: the :class:`~pynamodb_counters.BulkResult` up to the failure: the children of committed
      transactions are ``"added"`` / ``"removed"``, refused ones ``"rejected"``; the children of the transaction in
      flight are ``"failed"`` with this error (it may or may not have committed: audit, or send them again, a committed
      save then comes back as a duplicate); the children of later chunks are ``"unsent"``.
    """

    result: Any


class ExportError(CounterError):
    """A table export (``ExportTableToPointInTime``, in S3 or copied to a directory) cannot be read as DynamoDB
    writes it: no ``manifest-summary.json`` where it was looked for, an ION or an incremental export (the audit
    reads full exports in DynamoDB JSON), a data file listed in ``manifest-files.json`` but missing, a truncated or
    corrupt gzip, an MD5 or an item count that differs from the manifests, a data file listed twice, a line that is
    not ``{"Item": {...}}``; or it is the export of another table of the live table's name (another account, region
    or ``TableId``: ``export_of_copy=True`` audits a copy on purpose); or, for a counter fed from the stream, it was
    taken 24 hours ago or more (the records waiting then have left the stream). On the local engine, also: a
    relation counted with ``when=`` or ``amount=`` whose models the worker processes cannot import by their module
    and name (made inside a function), or a worker process that ended before its task (a script auditing at its top
    level, outside ``if __name__ == "__main__":``).
    The message names the file (or the table) and says what to do; nothing was reported.
    """

    msg = "export cannot be read"
