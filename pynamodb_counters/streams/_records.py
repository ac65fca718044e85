"""
Stream records as the handlers read them: the records of a Lambda event (or of ``GetRecords``), the table each
belongs to, its sequence number in an order that compares as text, and the model instance an image holds.

No I/O, but not pure: loading an image runs PynamoDB's deserialization of the models given. Which model an image is
of is the declarations' rule (``declare._identity``), as audits and exports read it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from pynamodb.exceptions import PynamoDBException

from .._keys import as_returned
from ..declare._expiry_rules import ttl_attribute
from ..declare._spec import identity_of
from ..exceptions import AmbiguousItemError, ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.models import Model

__all__ = ["SEQUENCE_DIGITS", "check_named", "check_tables", "load", "models_of", "padded", "records_of", "table_of"]

SEQUENCE_DIGITS = 40
"""The most digits a stream record's ``SequenceNumber`` has (DynamoDB Streams gives 21 to 40)."""


def records_of(event: Any, caller: str) -> List[Mapping[str, Any]]:
    """The records of ``event``, for ``caller`` (the handler, named in errors).

    :raises InvalidArgumentError: not a stream event nor a list of records.
    """
    records = event.get("Records") if isinstance(event, Mapping) else event
    if not isinstance(records, (list, tuple)):
        raise InvalidArgumentError(f"{caller}() takes a DynamoDB stream event ({{'Records': [...]}}, as Lambda "
                                   f"delivers it) or its records (as GetRecords returns them), not "
                                   f"{str(event)[:120]}. Nothing was written")
    for position, record in enumerate(records):
        lacks = "is not a mapping" if not isinstance(record, Mapping) else \
            ", ".join(f"has no {name!r}" for name in ("eventID", "dynamodb") if name not in record)
        if lacks:
            raise InvalidArgumentError(f"{caller}(): record {position} of {len(records)} {lacks}: a DynamoDB stream "
                                       f"record has its eventID and its dynamodb (keys, images, sequence number), "
                                       f"as Lambda and GetRecords give them; this one begins "
                                       f"{str(record)[:120]}. Nothing was written")
    return list(records)


def models_of(models: Any, caller: str, example: str) -> Tuple[Type[Model], ...]:
    """``models`` as a tuple, for ``caller`` (the handler, named in errors, with an ``example`` list of models).

    :raises InvalidArgumentError: not a list of models, or an empty one.
    """
    if isinstance(models, type) or isinstance(models, (str, bytes)):
        raise InvalidArgumentError(f"{caller}(models=...) takes a list of models, such as [{example}], not "
                                   f"{models!r}. Nothing was written")
    given = tuple(models)
    if not given:
        raise InvalidArgumentError(f"{caller}(models=...) needs at least one model. Nothing was written")
    return given


def check_named(records: Sequence[Mapping[str, Any]], models: Tuple[Type[Model], ...], table: Optional[str],
                caller: str) -> None:
    """Refuse records that name no table, for ``models`` in several tables, without ``table=``: no record could
    be told to be of one model's table rather than another's, and each would be skipped.

    :raises InvalidArgumentError: asking for ``table=``.
    """
    tables = sorted({model.Meta.table_name for model in models})
    if table is not None or len(tables) < 2:
        return
    if any(":table/" not in str(record.get("eventSourceARN") or "") for record in records):
        raise InvalidArgumentError(f"{caller}(): the records name no table (no eventSourceARN, as GetRecords "
                                   f"returns them), and the models are in {len(tables)} tables: {', '.join(tables)}\n"
                                   f"Give the records' table with table=, such as table={tables[0]!r} for the "
                                   f"records of {tables[0]}'s stream. Nothing was written.")


def check_tables(records: Sequence[Mapping[str, Any]], models: Tuple[Type[Model], ...], table: Optional[str],
                 caller: str) -> None:
    """Refuse records of a table none of ``models`` is stored in (named by their ``eventSourceARN``, else by
    ``table=``): a Lambda's event source is one table's stream, so a function given another table's counts nothing,
    forever, while reporting success.

    :raises ConfigurationError: naming the records' table, the models' tables and the fix. Nothing was written.
    """
    tables = {model.Meta.table_name for model in models}
    for position, record in enumerate(records):
        named = table_of(record, table)
        if named is not None and named not in tables:
            given = ", ".join(model.__name__ for model in models)
            raise ConfigurationError(
                f"{caller}(): record {position} ({record.get('eventID')}) is of table {named}'s stream, and the "
                f"models given ({given}) are stored in {', '.join(sorted(tables))}: this function would count "
                f"nothing.\nPoint its event source mapping at the stream of "
                f"{' or '.join(sorted(tables))}, or give it the models of {named}. Nothing was written.")


def table_of(record: Mapping[str, Any], table: Optional[str]) -> Optional[str]:
    """The table ``record`` is of: named by its ``eventSourceARN``, else ``table`` (``None``: any)."""
    source = str(record.get("eventSourceARN") or "")
    return source.split(":table/", 1)[1].split("/", 1)[0] if ":table/" in source else table


def padded(sequence: Any) -> str:
    """A ``SequenceNumber`` as text that sorts as the number does: zero-padded to :data:`SEQUENCE_DIGITS`.

    :raises InvalidArgumentError: not a sequence number.
    """
    text = str(sequence)
    if not text.isdigit() or len(text) > SEQUENCE_DIGITS:
        raise InvalidArgumentError(f"a stream record's SequenceNumber is a number of at most {SEQUENCE_DIGITS} "
                                   f"digits, not {text[:60]!r}. Nothing was written")
    return text.zfill(SEQUENCE_DIGITS)


def load(image: Dict[str, Any], models: Sequence[Type[Model]], named: Optional[str], *, expiring: bool = False
         ) -> Optional[Model]:
    """The item ``image`` holds, as the one model of ``models`` it fits loads it (``declare._identity``: its key
    attributes, its relations' prefixes, its discriminator, its non-null attributes), else ``None``: in the table
    ``named`` (``None``: any), and, ``expiring``, with its TTL attribute.

    :raises AmbiguousItemError: the image fits two of ``models`` (a polymorphic model's classes are one model).
    """
    loaded: List[Model] = []
    for model in models:
        if named is not None and model.Meta.table_name != named or not identity_of(model).fits(image):
            continue
        if expiring:
            ttl = ttl_attribute(model)
            if ttl is None or ttl.attr_name not in image:
                continue
        try:
            instance = model.from_raw_data(as_returned(image))
        except (PynamoDBException, ValueError, TypeError, KeyError):  # an item this model cannot load is not its own
            continue
        if not any(type(instance) is type(other) for other in loaded):
            loaded.append(instance)
    if len(loaded) > 1:
        first, second = (type(instance) for instance in loaded[:2])
        raise AmbiguousItemError(
            f"the item {_key_text(first, image)} fits both {first.__name__} and {second.__name__} "
            f"({first.__name__}: {identity_of(first).describe()}; {second.__name__}: "
            f"{identity_of(second).describe()}): an item is one model's, counted once.\n"
            f"Tell them apart: a counted_by(..., prefix=...) of each model's sort keys (neither starting the other), "
            f"a non-null attribute one declares and the other does not, or one DiscriminatorAttribute on a common "
            f"base of both. Nothing was written for this record or the records after it.")
    return loaded[0] if loaded else None


def _key_text(model: Type[Model], image: Dict[str, Any]) -> str:
    """The key of a raw image, as its values: ``('POST#p1', 'LIKE#ann')``."""
    names = [name for name, _ in identity_of(model).keys]
    return repr(tuple(next(iter((image.get(name) or {"NULL": True}).values())) for name in names))
