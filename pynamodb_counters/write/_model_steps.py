"""
PynamoDB's own item operations (a model's ``update()``, ``delete()``, ``save()``, ``get()`` and ``refresh()``) as
decision loops of the port: each builds its request with PynamoDB's own steps (its ``get_update_kwargs_from_instance``
and ``get_delete_kwargs_from_instance``, seen past the mixin's guards; its save arguments and key serialization;
its connection's ``get_operation_kwargs``), yields it, and loads the answer as PynamoDB does
(``deserialize()``, ``from_raw_data()``, its ``DoesNotExist`` and its errors, with the same texts).

What a parent's own writes send, and what the async methods of a model that counts nothing (or of any model inside
``skip_counting()``) send: a plain write, as PynamoDB's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from pynamodb.constants import ALL_NEW, ATTRIBUTES, DELETE_ITEM, GET_ITEM, ITEM, PUT_ITEM, RETURN_VALUES, UPDATE_ITEM

from ..transport._calls import Call, Steps
from ..transport._pynamodb import asked, tables_known
from ._actions import pynamodb_view

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action

__all__ = ["item_deleted", "item_got", "item_refreshed", "item_saved", "item_updated"]


def item_updated(instance: Any, actions: List[Action], condition: Optional[Condition] = None, *,
                 add_version_condition: bool = True) -> Steps[Dict[str, Any]]:
    """PynamoDB's ``update()``: one UpdateItem returning ``ALL_NEW``, loaded into ``instance``.

    :raises TypeError: ``actions`` is not a non-empty list (PynamoDB's own).
    :raises UpdateError: PynamoDB's, as its ``update()`` raises it.
    """
    if not isinstance(actions, list) or len(actions) == 0:
        raise TypeError("the value of `actions` is expected to be a non-empty list")
    model: Any = type(instance)
    yield from tables_known([model])
    request = pynamodb_view(instance).get_update_kwargs_from_instance(  # PynamoDB's own, version included
        actions, condition, add_version_condition=add_version_condition)
    request[RETURN_VALUES] = ALL_NEW  # as its update() asks
    data = yield from asked(Call(model, UPDATE_ITEM, request))
    item = data[ATTRIBUTES]
    stored = instance._get_discriminator_class(item)
    if stored and stored != model:
        raise ValueError(f"Cannot update this item from the returned class: {stored.__name__}")
    instance.deserialize(item)
    return data


def item_deleted(instance: Any, condition: Optional[Condition] = None, *,
                 add_version_condition: bool = True) -> Steps[Dict[str, Any]]:
    """PynamoDB's ``delete()``: one DeleteItem.

    :raises DeleteError: PynamoDB's, as its ``delete()`` raises it.
    """
    model: Any = type(instance)
    yield from tables_known([model])
    request = pynamodb_view(instance).get_delete_kwargs_from_instance(  # PynamoDB's own, version included
        condition, add_version_condition=add_version_condition)
    return (yield from asked(Call(model, DELETE_ITEM, request)))


def item_saved(instance: Any, condition: Optional[Condition] = None, *,
               add_version_condition: bool = True) -> Steps[Dict[str, Any]]:
    """PynamoDB's ``save()``: one PutItem of the whole item, then the local version bumped.

    :raises PutError: PynamoDB's, as its ``save()`` raises it.
    """
    model: Any = type(instance)
    yield from tables_known([model])
    args, kwargs = instance._get_save_args(condition=condition, add_version_condition=add_version_condition)
    request = model._get_connection().get_operation_kwargs(*args, range_key=kwargs.get("range_key"), key=ITEM,
                                                           attributes=kwargs["attributes"],
                                                           condition=kwargs["condition"])
    data = yield from asked(Call(model, PUT_ITEM, request))
    instance.update_local_version_attribute()
    return data


def item_got(model: Any, hash_key: Any, range_key: Any = None, consistent_read: bool = False,
             attributes_to_get: Optional[Sequence[str]] = None) -> Steps[Any]:
    """PynamoDB's ``get()``: one GetItem, the item loaded with ``from_raw_data()``.

    :raises DoesNotExist: the model's own, where there is no such item.
    :raises GetError: PynamoDB's, as its ``get()`` raises it.
    """
    yield from tables_known([model])
    hash_key, range_key = model._serialize_keys(hash_key, range_key)
    request = model._get_connection().get_operation_kwargs(hash_key, range_key=range_key,
                                                           consistent_read=consistent_read,
                                                           attributes_to_get=attributes_to_get)
    data = yield from asked(Call(model, GET_ITEM, request))
    item = data.get(ITEM) if data else None
    if item:
        return model.from_raw_data(item)
    raise model.DoesNotExist()


def item_refreshed(instance: Any, consistent_read: bool = False) -> Steps[None]:
    """PynamoDB's ``refresh()``: one GetItem, loaded into ``instance``.

    :raises DoesNotExist: the model's own, where the item is gone.
    :raises GetError: PynamoDB's, as its ``refresh()`` raises it.
    """
    model: Any = type(instance)
    yield from tables_known([model])
    hash_key, range_key = instance._get_hash_range_key_serialized_values()
    request = model._get_connection().get_operation_kwargs(hash_key, range_key=range_key,
                                                           consistent_read=consistent_read)
    data = yield from asked(Call(model, GET_ITEM, request))
    item = data.get(ITEM)
    if item is None:
        raise model.DoesNotExist("This item does not exist in the table.")
    stored = model._get_discriminator_class(item)
    if stored and stored != model:
        raise ValueError(f"Cannot refresh this item from the returned class: {stored.__name__}")
    instance.deserialize(item)
