"""
What a ``pynamodb-counters`` command acts on: the counter ``MODULE:Model.attribute`` names (or the relation
feeding it), the modules ``--import`` loads, the endpoint and region its models are pointed at, and the parent keys
``--parent`` gives, each value as its key attribute takes it.
"""
from __future__ import annotations

import base64
import binascii
import importlib
import json
import os
import sys
from typing import Any, List, Optional, Union

from pynamodb.constants import BINARY, NUMBER

from .._keys import key_attributes
from ..declare._attributes import CounterField
from ..declare._relations import Relation
from ..declare._spec import counters_of, feeders_of, relations_of
from ..exceptions import ConfigurationError

__all__ = ["Target", "load_module", "parse_key", "point", "resolve"]

Target = Union[CounterField, Relation]
"""What a command names: a counter, or a relation feeding one (its counter is the one audited)."""


def load_module(module_name: str) -> Any:
    """The module ``module_name``, imported.

    :raises ConfigurationError: if it fails to import, for whatever reason, its message's first line saying why.
        When the module itself is not found (or a package holding it), further lines say where it was looked for
        and what to do.
    """
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # a module failing to import, for whatever reason, is a usage error
        first, *advice = str(error).split("\n")  # a declaration error's advice follows its first line
        message = f"cannot import {module_name!r}: {type(error).__name__}: {first}"
        raise ConfigurationError("\n".join([message, *advice, *_not_found_advice(module_name, error)])) from error


def _not_found_advice(module_name: str, error: BaseException) -> List[str]:
    """Lines of advice for ``error`` importing ``module_name``: where modules are looked for and how to point
    there, when ``module_name`` itself, or a package holding it, was not found; none when the module was found and
    failed (a module it imports missing, say)."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    if not missing or not (module_name == missing or module_name.startswith(f"{missing}.")):
        return []
    package = missing.rpartition(".")[0]
    found = getattr(sys.modules.get(package), "__path__", None) if package else None
    where = f" ({package!r} found in {', '.join(found)})" if found else ""
    return [f"Modules are imported from the current directory ({os.getcwd()}), then from sys.path{where}.",
            f"Run the command from your project's directory (the one holding {module_name.partition('.')[0]!r}), or "
            f"put that directory on PYTHONPATH:",
            "PYTHONPATH=/path/to/project pynamodb-counters ...  (--import MODULE is looked for the same way)"]


def resolve(spec: str) -> Target:
    """``MODULE:Model.attribute`` (or ``MODULE:Model`` with one counter) as a counter or relation.

    :raises ConfigurationError: with what is wrong and what was expected.
    """
    module_name, _, path = spec.partition(":")
    if not module_name or not path:
        raise ConfigurationError(f"{spec!r}: expected MODULE:Model.attribute, such as myapp.models:Post.like_tally")
    module = load_module(module_name)
    model_name, _, attribute = path.partition(".")
    model = getattr(module, model_name, None)
    if not isinstance(model, type):
        raise ConfigurationError(f"{module_name} has no model {model_name!r}")
    if not attribute:
        counters = list(counters_of(model))
        if not counters and relations_of(model):
            raise ConfigurationError(_fed_by(model))
        if len(counters) != 1:
            found = ", ".join(counters) or "none"
            raise ConfigurationError(f"{model_name} has {len(counters)} counters ({found}); name one: "
                                     f"{module_name}:{model_name}.<counter>")
        attribute = counters[0]
    target = getattr(model, attribute, None)
    if not isinstance(target, (CounterField, Relation)):
        known = _fed_by(model) if not counters_of(model) and relations_of(model) else \
            f"counters of {model_name}: {', '.join(counters_of(model)) or 'none'}"
        raise ConfigurationError(f"{model_name}.{attribute} is not a CounterField or a counted_by relation; {known}")
    return target


def _fed_by(model: Any) -> str:
    """What to name instead of a child model without counters: the counters its relations feed."""
    feeds = ", ".join(f"{r.parent_model.__module__}:{r.parent_model.__name__}.{r.attribute} "
                      f"(via {model.__name__}.{r.name})" for r in relations_of(model))
    return f"{model.__name__} is a child model with no counters of its own; name the counter its relations feed: " \
           f"{feeds}"


def point(counter: CounterField, endpoint_url: Optional[str], region: Optional[str]) -> None:
    """Send the counter's parent model and every child model feeding it to another endpoint or region."""
    models: List[Any] = [counter.model] + [relation.child_model for relation in feeders_of(counter)]
    for model in models:
        if endpoint_url:
            model.Meta.host = endpoint_url
        if region:
            model.Meta.region = region
        model._connection = None


def parse_key(model: Any, raw: str) -> Any:
    """A ``--parent`` value as a key of ``model``: a JSON list of its key values, or a bare hash key; each value
    as the key attribute takes it (a number, bytes from base64, a date in PynamoDB's format)."""
    if raw.startswith("["):
        try:
            values = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ConfigurationError(f"--parent {raw!r} is not a JSON list: {error}") from error
        if not isinstance(values, list):
            raise ConfigurationError(f"--parent {raw!r} is not a JSON list")
    else:
        values = [raw]
    converted = [_key_value(attribute, value, raw) for attribute, value in zip(key_attributes(model), values)]
    return tuple(converted + values[len(converted):])


def _key_value(attribute: Any, value: Any, raw: str) -> Any:
    where = f"--parent {raw!r}: {type(attribute).__name__} {attribute.attr_name}"
    if not isinstance(value, str):
        if attribute.attr_type == NUMBER and isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise ConfigurationError(f"{where} takes a {'number' if attribute.attr_type == NUMBER else 'string'}, not "
                                 f"{value!r}")
    try:
        if attribute.attr_type == NUMBER:
            number = json.loads(value)
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ValueError(value)
            return number
        if attribute.attr_type == BINARY:
            return base64.b64decode(value, validate=True)
        return attribute.deserialize(value)
    except (ValueError, TypeError, binascii.Error) as error:
        kind = {NUMBER: "a number", BINARY: "bytes in base64"}.get(attribute.attr_type, "a value it can read")
        raise ConfigurationError(f"{where} takes {kind}: {error}") from error
