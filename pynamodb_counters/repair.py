"""
:func:`set_counter`: the explicit path to change a counter by hand, for repairs.
"""
from __future__ import annotations

from typing import Any, Optional

from pynamodb.exceptions import UpdateError

from .attributes import SEQUENCE, CounterField
from .compat import key_attributes, serialize_key
from .exceptions import ConditionFailedError, ConfigurationError, TransactionError
from .relations import normalize_key
from .transactions import discriminator_condition

__all__ = ["set_counter"]


def set_counter(counter: CounterField, key: Any, value: int, *, expected: Optional[int] = None) -> None:
    """Set one parent's counter to ``value``, in one conditional UpdateItem.

    Use it to repair drift found by an audit. With ``expected``, the write only happens if the counter still
    holds ``expected`` (a missing attribute counts as ``0``), so a child counted in the meantime is never
    overwritten: recount and try again.

    :param counter: the counter, as a class attribute (``Post.like_tally``).
    :param key: the parent's key: a hash key value, or a ``(hash, range)`` tuple.
    :param value: the new count, at least ``0``.
    :param expected: the value the counter must still hold.
    :raises ConditionFailedError: the parent does not exist, or the counter no longer holds ``expected``;
      nothing was written.
    """
    if not isinstance(counter, CounterField) or counter.model is None or counter.name is None:
        raise ConfigurationError(f"set_counter() needs a CounterField such as Post.like_tally, not {counter!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a counter holds an int of at least 0, not {value!r}")
    model = counter.model
    key = normalize_key(model, key, f"set_counter({counter!r})")
    hash_key, range_key = serialize_key(model, key)
    condition = key_attributes(model)[0].exists()
    discriminator = discriminator_condition(model)
    if discriminator is not None:
        condition &= discriminator
    if expected is not None:
        holds = counter == expected
        condition &= (holds | counter.does_not_exist()) if expected == 0 else holds
    try:
        model._get_connection().update_item(hash_key, range_key=range_key,
                                            actions=[counter.set(value), SEQUENCE.add(1)], condition=condition)
    except UpdateError as error:
        if error.cause_response_code == "ConditionalCheckFailedException":
            raise ConditionFailedError(
                f"{model.__name__} {key!r} does not exist" + (
                    f", or its {counter.name} no longer holds {expected}" if expected is not None else "")
                + "; nothing was written", error, model=model, key=key) from error
        raise TransactionError(f"DynamoDB rejected set_counter(): {error}", error) from error
