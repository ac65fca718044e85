"""
What PynamoDB's connection does around a request, as steps of a decision loop: the errors it raises for a request
that fails (:func:`asked`), and the table description its request builders read (:func:`tables_known`).

PynamoDB 6 describes a model's table from the model itself; PynamoDB 5 asks DynamoDB (DescribeTable) the first
time a connection builds a request for the table. :func:`tables_known` asks it as a step, before any request is
built, so that building a request never sends one (on PynamoDB 5, a hidden blocking call on an event loop).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, Tuple, Type

import botocore.exceptions
import pynamodb
from pynamodb.connection.base import MetaTable
from pynamodb.constants import (
    BATCH_GET_ITEM,
    DELETE_ITEM,
    DESCRIBE_TABLE,
    GET_ITEM,
    PUT_ITEM,
    QUERY,
    SCAN,
    TRANSACT_WRITE_ITEMS,
    UPDATE_ITEM,
)
from pynamodb.exceptions import (
    DeleteError,
    GetError,
    PutError,
    QueryError,
    ScanError,
    TableDoesNotExist,
    TableError,
    TransactWriteError,
    UpdateError,
)

from ._calls import Call, Step, Steps
from ._resend import DEFAULT_RETRY_POLICY, RetryPolicy, resend

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["DESCRIBES_ITS_TABLES", "asked", "pynamodb_error", "tables_known"]

_ERRORS: Dict[str, Tuple[Type[Exception], str]] = {
    GET_ITEM: (GetError, "Failed to get item"),
    BATCH_GET_ITEM: (GetError, "Failed to batch get items"),
    UPDATE_ITEM: (UpdateError, "Failed to update item"),
    PUT_ITEM: (PutError, "Failed to put item"),
    DELETE_ITEM: (DeleteError, "Failed to delete item"),
    QUERY: (QueryError, "Failed to query items"),
    SCAN: (ScanError, "Failed to scan table"),
    DESCRIBE_TABLE: (TableError, "Unable to describe table"),
    TRANSACT_WRITE_ITEMS: (TransactWriteError, "Failed to write transaction items"),
}


def pynamodb_error(call: Call, error: BaseException) -> Exception:
    """The error PynamoDB's connection raises for ``call`` failing with ``error`` (a botocore error): its
    ``GetError``, ``UpdateError``... with the same text, ``error`` as its cause."""
    if call.operation == DESCRIBE_TABLE and isinstance(error, botocore.exceptions.ClientError) and \
            "ResourceNotFound" in error.response.get("Error", {}).get("Code", ""):
        return TableDoesNotExist(error.response["Error"].get("Message", ""))
    kind, text = _ERRORS.get(call.operation, (TableError, f"Failed to {call.operation}"))
    return kind(f"{text}: {error}", error)


def asked(call: Call, policy: RetryPolicy = DEFAULT_RETRY_POLICY) -> Steps[Dict[str, Any]]:
    """Ask for ``call`` (transient failures asked again under ``policy``) and return its response.

    :raises PynamoDBException: the error PynamoDB's connection raises for the request (:func:`pynamodb_error`).
    :raises RetriesExhaustedError: transient failures outlasted the policy.
    """
    resent = yield from resend(call, policy, f"{call.operation} of {call.table}")
    if resent.answer.error is not None:
        raise pynamodb_error(call, resent.answer.error) from resent.answer.error
    assert resent.answer.response is not None
    return resent.answer.response


DESCRIBES_ITS_TABLES = int(pynamodb.__version__.split(".")[0]) >= 6
"""Whether PynamoDB describes each model's table from the model itself (PynamoDB 6): then nothing is asked."""


def tables_known(models: Iterable[Type[Model]]) -> Iterable[Step]:
    """The steps that make each model's connection know its table's description before a request is built:
    none on PynamoDB 6 (:data:`DESCRIBES_ITS_TABLES`), which describes a table from its model, and no generator
    made on the path of every write; on PynamoDB 5, a DescribeTable asked for each table its connection does not
    know yet, as PynamoDB's ``describe_table()`` would."""
    return () if DESCRIBES_ITS_TABLES else _described(models)


def _described(models: Iterable[Type[Model]]) -> Steps[None]:
    for model in models:
        connection: Any = model._get_connection().connection
        table = model.Meta.table_name
        if table in connection._tables:
            continue
        response = yield from asked(Call(model, DESCRIBE_TABLE, {"TableName": table}))
        described = response.get("Table")
        if described and table not in connection._tables:
            connection.add_meta_table(MetaTable(described))
