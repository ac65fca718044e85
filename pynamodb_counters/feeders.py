"""
List, migrate or forget the feeder records of a counter's parents, in bulk, while the application keeps writing.

::

    report = migrate_feeders(Post.like_tally)                                  # a dry run: what is recorded
    migrate_feeders(Post.like_tally, migrate=True, dry_run=False)              # module:Class.relation -> current ids
    migrate_feeders(Post.like_tally, forget=["app.gone:Reaction.post"], dry_run=False)

Every counted write records, on the parent item (or the shard item its delta lands on), which relations fed each
counter (``_cfeed``, see :doc:`reconciliation`); an audit refuses a parent that records a relation it has not
loaded. Earlier releases recorded a relation by its module path, which a refactor breaks: those entries are still
recognised as their loaded relation, and ``migrate=True`` rewrites them to the current ids. ``forget=`` removes the
entries of relations that no longer exist.

Live-safe: each item is rewritten with two conditional UpdateItems, first ``ADD`` of the new ids, then ``DELETE``
of the old ones (DynamoDB cannot ADD to and DELETE from one set in one update), so an item never lacks the record
of a relation that fed it, and counted writes landing in between (which ADD their own entries) are untouched.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

from pynamodb.exceptions import UpdateError

from ._keys import ParentKey, key_attributes, serialize_key
from .declare._attributes import CounterField
from .declare._feeder_ids import feeder_id
from .declare._relations import Relation
from .declare._shards import shard_key
from .declare._spec import feeders_of, shard_count
from .declare._stored_names import FEEDER_SEPARATOR, FEEDERS, SHARD_COUNT
from .exceptions import InvalidArgumentError, TransactionError
from .reconcile import check_scannable
from .reconcile._audit_rules import loaded_feeders
from .reconcile._reports import FeederChange, FeederEntry, FeederReport
from .write._fetches import parent_keys, read_shards, scan_parents
from .write._items import ShardItems, count_of

__all__ = ["migrate_feeders"]


def migrate_feeders(target: Union[CounterField, Relation], *, parents: Optional[Iterable[Any]] = None,
                    key_prefix: Optional[str] = None, limit: Optional[int] = None, migrate: bool = False,
                    forget: Iterable[str] = (), dry_run: bool = True) -> FeederReport:
    """List the feeder ids recorded on ``target``'s parents and, with ``migrate`` or ``forget``, rewrite them.

    :param target: the counter (``Post.like_tally``) or a relation feeding it.
    :param parents: explicit parent keys; by default a Scan of the parent's table, filtered as an audit's.
    :param key_prefix: with a Scan, only parents whose hash key starts with it.
    :param limit: with a Scan, stop after this many parents.
    :param migrate: rewrite each legacy id (``module:Class.relation``, recorded by earlier releases) of a loaded
      relation to its current id.
    :param forget: feeder ids to remove (as listed, with or without the ``counter<`` prefix): those of relations
      removed from the code, once their children are gone or counted by another relation. An audit stops
      counting what a forgotten relation fed, so a later repair sets the counter to what the loaded relations count.
    :param dry_run: report what would change and write nothing (the default).
    :raises InvalidArgumentError: ``target`` is not a counter or relation, a negative ``limit``, or ``forget``
      names a loaded relation's id (its children are counted: nothing to forget; a legacy id is migrated instead).
    :raises ConfigurationError: as :func:`~pynamodb_counters.audit` raises for a Scan it cannot tell parents in,
      or two loaded relations share an id.
    """
    counter = target.counter if isinstance(target, Relation) else target
    if not isinstance(counter, CounterField) or counter.model is None or counter.name is None:
        raise InvalidArgumentError(f"migrate_feeders() needs a CounterField such as Post.like_tally or a relation "
                                   f"such as Like.post, not {target!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgumentError(f"migrate_feeders(limit=...) is a whole number of at least 0, not {limit!r}")
    model, prefix = counter.model, f"{counter.attr_name}{FEEDER_SEPARATOR}"
    known = loaded_feeders(counter)
    current = {feeder_id(relation) for relation in feeders_of(counter)}
    forgotten = {raw[len(prefix):] if raw.startswith(prefix) else raw for raw in forget}
    for feeder in sorted(forgotten & set(known)):
        relation = known[feeder]
        raise InvalidArgumentError(
            f"migrate_feeders(forget=[{feeder!r}]): that is the {'' if feeder in current else 'legacy '}id of "
            f"{relation.child_model.__name__}.{relation.name}, which is loaded: its children are counted"
            + ("" if feeder in current else "; rewrite it with migrate=True (the command's --migrate)")
            + ". Nothing was written")
    recorded: Dict[str, Set[ParentKey]] = {}
    changes: List[FeederChange] = []
    checked = 0
    for key, items in _parents(counter, parents, key_prefix, limit):
        checked += 1
        for shard, item in enumerate(items):
            entries = set(((item or {}).get(FEEDERS.attr_name) or {}).get("SS", ()))
            ids = {entry[len(prefix):] for entry in entries if entry.startswith(prefix)}
            for feeder in ids:
                recorded.setdefault(feeder, set()).add(key)
            legacy = {feeder for feeder in ids if feeder in known and feeder not in current} if migrate else set()
            added = tuple(sorted({known[feeder].feeder_entry for feeder in legacy} - entries))
            removed = tuple(sorted(prefix + feeder for feeder in legacy | (ids & forgotten)))
            if added or removed:
                status = "planned" if dry_run else _rewrite(model, shard_key(key, shard), added, removed)
                changes.append(FeederChange(model, key, shard, added, removed, status))
    order = {"current": 0, "legacy": 1, "unknown": 2}
    listed = [FeederEntry(feeder, _status(feeder, known, current), _name(known.get(feeder)), len(keys))
              for feeder, keys in recorded.items()]
    listed.sort(key=lambda entry: (order[entry.status], entry.feeder))
    return FeederReport(model, counter.name, checked, tuple(listed), tuple(changes), not dry_run)


def _status(feeder: str, known: Dict[str, Relation], current: Set[str]) -> str:
    return "current" if feeder in current else "legacy" if feeder in known else "unknown"


def _name(relation: Optional[Relation]) -> Optional[str]:
    return None if relation is None else f"{relation.child_model.__name__}.{relation.name}"


def _parents(counter: CounterField, parents: Optional[Iterable[Any]], key_prefix: Optional[str],
             limit: Optional[int]) -> Iterator[Tuple[ParentKey, ShardItems]]:
    """Each parent's key and shard items, strongly consistent: the ``parents`` given that exist, or a Scan's."""
    model: Any = counter.model
    if parents is not None:
        keys = parent_keys(model, parents, f"migrate_feeders({counter!r}, parents=...)")
        found = read_shards(model, keys, counter.shards, consistent_read=True)
        yield from ((key, found[key]) for key in keys if found[key][0])
        return
    check_scannable(model)
    for count, (key, item) in enumerate(scan_parents(model, feeders_of(counter), key_prefix)):
        if limit is not None and count >= limit:
            return
        if shard_count(model) == 1 and (count_of(item, SHARD_COUNT.attr_name) or 1) == 1:
            yield key, [item]
        else:
            yield key, read_shards(model, [key], counter.shards, consistent_read=True, parents={key: item})[key]


def _rewrite(model: Any, key: ParentKey, added: Tuple[str, ...], removed: Tuple[str, ...]) -> str:
    """ADD ``added``, then DELETE ``removed``, on the item ``key`` if it still exists: ``"changed"``, or
    ``"gone"`` when it was deleted meanwhile."""
    hash_key, range_key = serialize_key(model, key)
    exists = key_attributes(model)[0].exists()
    connection = model._get_connection()
    for action in ([FEEDERS.add(set(added))] if added else []) + ([FEEDERS.delete(set(removed))] if removed else []):
        try:
            connection.update_item(hash_key, range_key=range_key, actions=[action], condition=exists)
        except UpdateError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise TransactionError(f"DynamoDB rejected the feeder rewrite of {model.__name__} {key!r}: {error}",
                                       error) from error
            return "gone"
    return "changed"
