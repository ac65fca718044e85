"""
Guards on caller input, pure, no I/O: each refuses, before anything is sent, a write that would bypass counting or
that the library cannot carry out as asked, with an error that says what to do instead.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Type

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from ._context import counting_skipped
from ._spec import counters_of, relations_of
from .attributes import loaded_counters
from .exceptions import CountingBypassError, InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

__all__ = ["UNSET", "action_paths", "bypass_of", "check_child_key", "check_condition", "check_counters_unchanged",
           "check_token", "counted_options", "given", "guard_update", "refuse_options", "value"]

UNSET: Any = object()
"""A counting option (``token=``, ``retry=``, ``ignore_duplicate=``, ``ignore_missing=``) the caller did not give."""


def check_condition(condition: Any) -> None:
    """Refuse a ``condition`` that is not a PynamoDB condition (``None`` is no condition).

    :raises TypeError: naming what a condition looks like.
    """
    if condition is not None and not isinstance(condition, Condition):
        raise InvalidArgumentError(f"condition must be a PynamoDB condition such as Like.liked_at.exists(), not "
                        f"{condition!r}")


def check_child_key(instance: Model) -> None:
    """Refuse a counted child whose own key is incomplete: it is written, and found again, by its key.

    :raises InvalidArgumentError: naming the key attribute that holds ``None``.
    """
    model = type(instance)
    for name in (model._hash_keyname, model._range_keyname):
        if name and getattr(instance, name) is None:
            raise InvalidArgumentError(f"{model.__name__}.{name}, part of its key, is None: a counted child is "
                                       f"written and counted by its key, so set it first. Nothing was written")


def check_token(token: Optional[str]) -> str:
    """``token`` as a write's ``ClientRequestToken``, or a fresh UUID for ``None``.

    :raises InvalidArgumentError: not a string of 1 to 36 characters.
    """
    if token is None:
        return str(uuid.uuid4())
    if not (isinstance(token, str) and 1 <= len(token) <= 36):
        raise InvalidArgumentError(f"a ClientRequestToken is a string of 1 to 36 characters, not {token!r}")
    return token


def check_counters_unchanged(instance: Any) -> None:
    """Refuse to save an instance whose counters were set by hand.

    :raises CountingBypassError: a counter differs from the value last loaded into this instance (or from
      ``0`` on a new instance).
    """
    counters = counters_of(type(instance))
    if not counters:
        return
    loaded = loaded_counters(instance)
    for name in counters:
        value = instance.attribute_values.get(name)
        if value is not None and value != loaded.get(name, 0):
            raise CountingBypassError(
                f"{type(instance).__name__}.{name} was set by hand to {value!r}; counters change only through "
                f"counted writes. Use pynamodb_counters.set_counter() to repair one, or skip_counting() for a "
                f"migration. Nothing was written"
            )


def guard_update(instance: Model, actions: Sequence[Action], *, counted: bool = False) -> FrozenSet[str]:
    """Refuse ``update()`` actions that would bypass counting: on counters, on a counted child's key attributes,
    and, unless the update is ``counted`` (its counts moved in the same transaction), on the attributes its
    relations read.

    :returns: the attributes (Python names) its relations read that the actions touch.
    :raises CountingBypassError: naming the attribute and the way around it.
    """
    model = type(instance)
    if counting_skipped(model):
        return frozenset()
    attributes = model.get_attributes()
    protected: Dict[str, str] = {attributes[name].attr_name: f"{model.__name__}.{name} is a counter"
                                 for name in counters_of(model)}
    decides: Dict[str, str] = {}
    relations = relations_of(model)
    if relations:
        for name in filter(None, (model._hash_keyname, model._range_keyname)):
            protected[attributes[name].attr_name] = f"{model.__name__}.{name} is part of a counted child's key"
        for relation in relations:
            for name in relation.read_attributes(instance):
                decides.setdefault(attributes[name].attr_name, name)
    touched = set()
    for path in action_paths(actions):
        if path in protected:
            raise CountingBypassError(f"{protected[path]}: update() cannot change it without bypassing counting. "
                                      f"Use set_counter() to repair a counter, or wrap a deliberate migration in "
                                      f"skip_counting()")
        if path in decides:
            if not counted:
                raise bypass_of(model, decides[path])
            touched.add(decides[path])
    return frozenset(touched)


def bypass_of(model: Type[Model], name: str) -> CountingBypassError:
    """The refusal of an ``update()`` action on ``name``, an attribute that decides what a counted child counts
    for, where its counts cannot move with it."""
    return CountingBypassError(
        f"{model.__name__}.{name} decides what the child counts for: update() cannot change it here without "
        f"bypassing counting. Load the child, change the attribute and save() it (one transaction that moves its "
        f"counts with it), set it to a plain value with update() (SET to a value or REMOVE: the library knows the "
        f"result and moves the counts), or wrap a deliberate migration in skip_counting()")


def action_paths(actions: Sequence[Action]) -> List[str]:
    """The top-level attribute names (as stored) that ``actions`` write, in order."""
    paths = []
    for action in actions:
        for value in action.values:
            path = getattr(value, "path", None)
            if path and isinstance(value, Path):
                paths.append(path[0].split("[")[0])
                break
    return paths


def counted_options(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The PynamoDB keyword arguments a counted or parent write honours: ``add_version_condition`` only."""
    unknown = sorted(set(kwargs) - {"add_version_condition"})
    if args or unknown:
        raise InvalidArgumentError(f"counted writes take condition=, add_version_condition=, retry= and token=; not "
                        f"{', '.join(unknown) or 'extra positional arguments'} (PynamoDB 5's per-call settings: use "
                        f"Meta.extra_headers)")
    return dict(kwargs)


def refuse_options(instance: Any, write: str, **options: Any) -> None:
    """Refuse the counting options given to a write that is not counted (a parent's save or delete, an update that
    changes nothing a child counts by): dropping them silently would promise what the write does not do.

    :raises InvalidArgumentError: naming them, and what the write is.
    """
    given = sorted(name for name, value in options.items() if value is not UNSET)
    if not given:
        return
    model = type(instance)
    what = (f"{model.__name__}.{write}() changes nothing its counters count by, so it is PynamoDB's own UpdateItem"
            if relations_of(model) else
            f"{model.__name__} is a parent, so its {write}() is PynamoDB's own write (counters kept as stored)")
    raise InvalidArgumentError(f"{what}: {', '.join(f'{name}=' for name in given)} apply to counted writes of "
                               f"children (save, delete, and updates of what they count by); leave them out. "
                               f"Nothing was written")


def given(kwargs: Dict[str, Any], **options: Any) -> Dict[str, Any]:
    """``kwargs`` plus the counting options the caller did give, for a model that counts nothing: PynamoDB then
    refuses them with its own ``TypeError``, as it would without the mixin."""
    return {**kwargs, **{name: value for name, value in options.items() if value is not UNSET}}


def value(option: Any) -> Any:
    """A counting option's value, ``None`` (the default) when it was not given."""
    return None if option is UNSET else option
