"""
What a table export says of one counter, item by item: each parent's stored total (its own item and its shard
items) and the children its relations count into it, with the meaning of the live audit (``_audit_rules``). Pure,
no I/O: the export's data files are read elsewhere, and any number of them are tallied apart and merged
(by partition: :func:`merge_partitions`), so the same computation runs on this machine's cores or on Spark.
What tallying one data file needs (:class:`FileCounting`) is plain values, which pickle without the models: the
processes reading the files import a model only to load the children of a relation counted with ``when=`` or
``amount=`` (:class:`LoadedRelation`).

The live audit reads with DynamoDB's conditions (a Scan filtered by the parent model's ``audit_filter()``, a
Query of a parent's partition under a relation's prefix, filtered by the classes it counts); here the same
conditions are evaluated on each raw item (``_conditions``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple, Union

from ..._keys import ParentKey, as_returned, key_attributes
from ...declare._attributes import CounterField
from ...declare._expiry_rules import STREAM
from ...declare._item_conditions import Item, ItemRule, compiled, matcher_of
from ...declare._relations import Relation
from ...declare._spec import identity_of
from ...declare._stored_names import FEEDER_SEPARATOR, FEEDERS, MARKER, SHARD, stream_mark_name
from ...exceptions import ExportError
from ...write._items import StoredNumber, stored_number
from .._audit_rules import (
    Uncountable,
    audited,
    counted_child,
    expired_at,
    loaded_feeders,
    shares_partitions,
    sum_stored,
    ttl_name,
)

__all__ = ["ChildRule", "ExportCounting", "FileCounting", "Finding", "Findings", "LoadedRelation", "Partition", "Share",
           "Tally", "merge_partitions"]

Typed = Tuple[str, Any]
"""One raw typed value, hashable: ``("S", "POST#a91f")``."""

RawKey = Tuple[Typed, ...]
"""An item's key as raw typed values: ``(("S", "POST#a91f"), ("S", "META"))``."""

_SHARD_SUFFIX = "#SHARD"
_NO_FEEDS: FrozenSet[str] = frozenset()


Share = Tuple[Optional[str], FrozenSet[str], bool, Optional[str]]
"""What one parent item (or one of its shard items) holds of the counter: its raw number as stored (``None`` when
absent), the feeder ids it records for the counter, whether it is a rollup past its TTL, and, for a counter fed
from the stream, the oldest of its relations' marks there (``""`` where one is missing; ``None`` for a counter not
fed from the stream). A plain tuple, as everything a tally holds: tallies cross processes (pickled) by the
million."""

Partition = List[Any]
"""What some of an export's data files hold under one parent hash key: ``[children, parents, shards, uncountable]``,
what the children counted into it add up to, its parent items (``{raw key: Share}``), their shard items
(``{(parent's raw key, index): Share}``), each ``None`` while empty, and why a child of it cannot be counted
(``None`` while every child can). The children of a parent share its hash key
(its partition), and a shard item's key extends it, so every finding about a parent is made from its partition
alone. A plain list, so that a tally pickles without a call per partition."""

CHILDREN, PARENTS, SHARDS, UNCOUNTABLE = 0, 1, 2, 3

Where = Union[str, Typed]
"""A partition's hash key, as a tally is keyed by it: the string itself for a string key (hashed once, cached by
Python; most tables' hash keys), else its raw typed value (``("N", "7")``)."""

Tally = Dict[Where, Partition]
"""Some data files' partitions, by the parent hash key they hold."""


def merge_partitions(first: Partition, second: Partition) -> Partition:
    """Two shares of one partition together (``first``, updated; ``second`` unchanged)."""
    first[CHILDREN] += second[CHILDREN]
    first[UNCOUNTABLE] = first[UNCOUNTABLE] or second[UNCOUNTABLE]
    for slot in (PARENTS, SHARDS):
        theirs = second[slot]
        if theirs:
            if first[slot] is None:
                first[slot] = dict(theirs)
            else:
                first[slot].update(theirs)
    return first


class Finding(NamedTuple):
    """A parent of the export whose counter is not what its children add up to, or whose children the export cannot
    count (``actual`` is then ``None``, and the live table decides): its feeders are not all loaded
    (``unloaded``), a child of its partition cannot be counted, or its partition holds several parents of a
    counter fed under a prefix."""

    key: ParentKey
    stored: Optional[StoredNumber]
    actual: Optional[int]
    unloaded: Tuple[str, ...] = ()


class Findings(NamedTuple):
    """What some partitions of an export say: how many parents they hold, and the findings among them."""

    parents: int
    found: Tuple[Finding, ...]

    def merge(self, other: Findings) -> Findings:
        """These findings and ``other``'s."""
        return Findings(self.parents + other.parents, self.found + other.found)


_NO_FINDINGS = Findings(0, ())


@dataclass(frozen=True)
class _Children:
    """How the items of one relation are found in its child's table, as the live audit finds them."""

    relation: Relation
    table: str
    hash_name: str
    range_name: str
    prefix: str
    counted: Optional[ItemRule]  # the classes it counts, in a polymorphic model, compiled


class LoadedRelation:
    """A relation counted with ``when=`` or ``amount=``, functions of the loaded child: a process that counts its
    children needs the models themselves. It pickles as its counter's model and its child model, by reference
    (their module and name, which the process unpickling it imports), and its place among the counter's feeders.

    :raises ExportError: when pickled, a model that cannot be imported by its module and name (a class made inside
      a function; one of an interactive session's, a notebook's ``__main__``).
    """

    def __init__(self, relation: Relation, index: int, feeders: int) -> None:
        self.relation, self.index, self.feeders = relation, index, feeders

    def __reduce__(self) -> Tuple[Any, ...]:
        relation = self.relation
        model: Any
        for model in (relation.counter.model, relation.child_model):
            if not _importable(model):
                raise ExportError(
                    f"{_named(relation)} counts with when= or amount=, functions of the loaded "
                    f"{relation.child_model.__name__}: the worker processes reading the export load its models by "
                    f"their module and name, and {model.__module__}.{model.__qualname__} cannot be imported so (a "
                    f"class made inside a function, or in an interactive session?). Declare the models at the top "
                    f"level of a module, or audit with workers=1 to read the export in this process")
        return _loaded_relation, (relation.counter.model, relation.counter.name, relation.child_model, self.index,
                                  self.feeders)


def _loaded_relation(model: Any, name: str, child: Any, index: int, count: int) -> LoadedRelation:
    """A :class:`LoadedRelation` unpickled: the relation found again among the counter's feeders (``child``'s
    module, which declares it, is imported by then)."""
    feeders = audited(model.get_attributes()[name])[1]
    if len(feeders) != count or feeders[index].child_model is not child:
        raise ExportError(f"{count} relations feed {model.__name__}.{name} where the audit started, {len(feeders)} "
                          f"in this worker: make the modules declaring them importable here")
    return LoadedRelation(feeders[index], index, count)


def _importable(model: Any) -> bool:
    """Whether ``model`` is found again by its module and qualified name, as pickle finds a class, in a worker
    started by ``forkserver`` or ``spawn``: one of ``__main__`` only where the worker runs ``__main__`` again."""
    if model.__module__ == "__main__" and not _main_run_again():
        return False
    found = sys.modules.get(model.__module__)
    for part in model.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is model


def _main_run_again() -> bool:
    """Whether a worker started by ``forkserver`` or ``spawn`` runs this process's ``__main__`` again, as
    ``multiprocessing`` prepares it: a script (by its file), a module run with ``-m`` (by its name), but not a
    package's ``__main__``, nor an interactive session's, a notebook's or ``python -c``'s, which have neither."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return bool(name != "__main__" and not name.endswith(".__main__"))
    return getattr(main, "__file__", None) is not None


class ChildRule(NamedTuple):
    """How a data file's items are told to be children of one relation, and what each adds: plain values."""

    table: str
    hash_name: str
    range_name: str
    prefix: str
    counted: Optional[ItemRule]
    """What tells the relation's classes from the others of its model's table (:func:`compiled`), ``None`` for
    every item under the prefix."""
    loaded: Optional[LoadedRelation]
    """A relation counted with ``when=`` or ``amount=``: each child is loaded and given to them; ``None`` for a
    relation whose children each count one."""


class _Child(NamedTuple):
    """A :class:`ChildRule` as the hot loop reads it: its condition made a function."""

    hash_name: str
    range_name: str
    prefix: str
    counted: Optional[Callable[[Item], bool]]
    loaded: Optional[LoadedRelation]


class ExportCounting:
    """How an export is read for one counter: which tables it needs, and what each of their items means.

    :ivar counter: the counter audited.
    :ivar tables: the tables an audit of it reads, each with the relations (or the parent model) that need it.
    :raises ExportError: a relation counted through a ``children=`` function (it reads the live table, so it cannot
      be evaluated from an export), or a parent filter or discriminator an item cannot be matched against here.
    """

    def __init__(self, counter: CounterField, feeders: Tuple[Relation, ...], key_prefix: Optional[str] = None
                 ) -> None:
        model: Any = counter.model
        self.counter, self.model, self.key_prefix = counter, model, key_prefix
        self.parent_table: str = model.Meta.table_name
        self.key_names = tuple(attribute.attr_name for attribute in key_attributes(model))
        self.children: List[_Children] = []
        for relation in feeders:
            if relation.prefix is None:
                raise ExportError(f"{_named(relation)} is counted by its children= function, which reads the live "
                                  f"table: it cannot be evaluated from an export. Audit this counter on the live table "
                                  f"(audit() without export=), or declare counted_by(..., prefix=...)")
            child = relation.child_model
            child_keys = key_attributes(child)
            counted = identity_of(child).condition  # the items of its model alone
            self.children.append(_Children(relation, child.Meta.table_name, child_keys[0].attr_name,
                                           child_keys[-1].attr_name, relation.prefix,
                                           None if counted is None else compiled(counted, _named(relation),
                                                                                 ExportError)))
        needs: Dict[str, List[str]] = {self.parent_table: [f"{model.__name__}.{counter.name}"]}
        for found in self.children:
            needs.setdefault(found.table, []).append(_named(found.relation))
        self.tables: Dict[str, Tuple[str, ...]] = {table: tuple(names) for table, names in needs.items()}
        audit_filter = model.audit_filter()
        parent_filter = None if audit_filter is None else \
            compiled(audit_filter, f"{model.__name__}.audit_filter()", ExportError)
        # children stored beside their parents under a prefix are never parents (as a Scan audit leaves them out)
        beside = tuple(found.prefix for found in self.children
                       if found.table == self.parent_table and len(self.key_names) > 1)
        rollup = any(relation.create_parent for relation in feeders)
        self.loaded = frozenset(loaded_feeders(counter))
        self.shared_partitions = any(shares_partitions(found.relation) for found in self.children)
        # fed from the stream: a parent is compared at its marks, and records after them may have waited when the
        # export was taken: where its partition has one in the stream (``latest``), the live table decides
        self.marks = tuple(stream_mark_name(relation.feeder_entry) for relation in feeders
                           if relation.counting == STREAM)
        self.latest: Optional[Dict[str, str]] = None
        """The last record of each partition in the streams of the tables of the relations fed from the stream
        (``_stream_proof.latest_records``), read before the export's partitions are judged."""
        self.file = FileCounting(
            self.parent_table, self.key_names, key_prefix, parent_filter, beside,
            (counter.attr_name, SHARD.attr_name, FEEDERS.attr_name, f"{counter.attr_name}{FEEDER_SEPARATOR}"),
            self.marks, ttl_name(model) if rollup else None,
            tuple(ChildRule(found.table, found.hash_name, found.range_name, found.prefix, found.counted,
                            LoadedRelation(found.relation, index, len(feeders)) if found.relation.conditional
                            else None)
                  for index, found in enumerate(self.children)))
        """What reading one data file needs (plain values, but the relations counted with ``when=`` or
        ``amount=``): what travels to the processes that read them."""

    def tally(self, table: str, items: Iterable[Item]) -> Tally:
        """What ``items`` (raw, from an export of ``table``) say of the counter, by partition
        (:meth:`FileCounting.tally`)."""
        return self.file.tally(table, items)

    # -- one whole partition -------------------------------------------------------------------------------------
    def findings(self, partition: Partition) -> Findings:
        """What the export says of the parents of one partition, every data file's share of it merged."""
        children, parents, shards, uncountable = partition
        if not parents:
            return _NO_FINDINGS
        # a partition whose children cannot all be counted, or whose several parents all count every child under
        # the prefix: nominated, and the live audit (which reads each child) decides
        undecided = uncountable is not None or (len(parents) > 1 and self.shared_partitions)
        found: List[Finding] = []
        for raw, (stored_raw, feeds, gone, mark) in parents.items():
            if gone:  # a rollup past its TTL: no write counts into it any more
                continue
            own = sorted((index, each) for (parent, index), each in (shards or {}).items() if parent == raw)
            values: List[Optional[StoredNumber]] = [_stored(stored_raw)]
            values.extend(_stored(each[0]) for _, each in own)
            stored = sum_stored(values)
            unloaded = feeds.union(*(each[1] for _, each in own)) - self.loaded
            waited = mark is not None and self._waited(raw, min([mark] + [each[3] or "" for _, each in own]))
            if unloaded:
                found.append(Finding(self._key(raw), stored, None, tuple(sorted(unloaded))))
            elif undecided or waited:
                found.append(Finding(self._key(raw), stored, None))
            elif stored != children:
                found.append(Finding(self._key(raw), stored, children))
        return Findings(len(parents), tuple(found))

    def _waited(self, raw: RawKey, mark: str) -> bool:
        """Whether records after ``mark`` (a parent's oldest, ``""`` for none) are in its partition's stream: they
        may have waited for the handler when the export was taken, so the export does not show the children at
        the marks."""
        if self.latest is None:
            raise ExportError("the streams of a counter fed from the stream are read before its export is judged")
        kind, value = raw[0]
        latest = self.latest.get(value if kind == "S" else str(Decimal(value).normalize()) if kind == "N" else "")
        return latest is not None and latest > mark

    def _key(self, raw: RawKey) -> ParentKey:
        return tuple(attribute.deserialize(attribute.get_value(as_returned({"v": {kind: value}})["v"]))
                     for attribute, (kind, value) in zip(key_attributes(self.model), raw))


class FileCounting:
    """What reading one data file of an export needs of an :class:`ExportCounting`, the hot loop of an audit from
    an export: the parent table's key names, the counter's stored names, prefixes, compiled conditions
    (:func:`compiled`), a rule per relation (:class:`ChildRule`). Plain values: it pickles small, and a process
    given it builds it again without importing the models, but for the relations counted with ``when=`` or
    ``amount=`` (:class:`LoadedRelation`).

    :param names: the counter's stored name, the shard index's, the feeder ids', and the counter's entry prefix in
      the feeder ids.
    :param expiring: the stored name of the parent's ``TTLAttribute`` where the counter has rollups (a parent past
      it is outside drift), else ``None``.
    """

    def __init__(self, parent_table: str, key_names: Tuple[str, ...], key_prefix: Optional[str],
                 parent_filter: Optional[ItemRule], beside: Tuple[str, ...], names: Tuple[str, str, str, str],
                 marks: Tuple[str, ...], expiring: Optional[str], children: Tuple[ChildRule, ...]) -> None:
        self._given = (parent_table, key_names, key_prefix, parent_filter, beside, names, marks, expiring, children)
        self.parent_table, self.key_names, self.key_prefix, self.beside = parent_table, key_names, key_prefix, beside
        self.parent_filter = None if parent_filter is None else matcher_of(parent_filter)
        self.counter_name, self.shard_name, self.feeds_name, self.entry = names
        self.marks, self.expiring, self.rules = marks, expiring, children
        self._children: Dict[str, List[_Child]] = {}
        for rule in children:
            self._children.setdefault(rule.table, []).append(_Child(
                rule.hash_name, rule.range_name, rule.prefix,
                None if rule.counted is None else matcher_of(rule.counted), rule.loaded))

    def __reduce__(self) -> Tuple[Any, ...]:
        return FileCounting, self._given

    def tally(self, table: str, items: Iterable[Item]) -> Tally:
        """What ``items`` (raw, from an export of ``table``) say of the counter, by partition: the hot loop of an
        export audit, run once per item."""
        result: Tally = {}
        parent = self._parent if table == self.parent_table else None
        children = self._children.get(table, [])
        child = self._child
        sorts = {found.range_name for found in children}
        if len(sorts) != 1:  # no relation reads this table's items (or they differ in sort key): each in turn
            for item in items:
                if parent is not None:
                    parent(item, result)
                for found in children:
                    child(found, item, result)
            return result
        # the usual table: one sort key, read once per item; an item under no relation's prefix is no child
        (sort_name,), prefixes = sorts, tuple(found.prefix for found in children)
        for item in items:
            sort = item.get(sort_name)
            text = sort.get("S") if sort else None
            if text is not None and text.startswith(prefixes):
                for found in children:
                    child(found, item, result)
            if parent is not None:
                parent(item, result)
        return result

    def _parent(self, item: Item, result: Tally) -> None:
        names, shard_name = self.key_names, self.shard_name
        if self.beside:  # most items of a table are children: left out first, on their sort key alone
            sort = item.get(names[1])
            text = sort.get("S") if sort else None
            if text is not None and text.startswith(self.beside) and shard_name not in item:
                return
        key = _raw_key(item, names)
        if key is None or MARKER in item:  # an expiry marker is the library's own item, never a parent
            return
        if shard_name in item:  # a shard item: its share goes to the parent whose key it extends
            index = int(item[shard_name]["N"])
            parent = _parent_of_shard(key, index)
            if parent is not None and self._prefixed(parent):
                _shares(result, parent[0], SHARDS)[(parent, index)] = self._share(item)
            return
        if not self._prefixed(key) or (self.parent_filter is not None and not self.parent_filter(item)):
            return
        _shares(result, key[0], PARENTS)[key] = self._share(item)

    def _prefixed(self, key: RawKey) -> bool:
        return self.key_prefix is None or (key[0][0] == "S" and key[0][1].startswith(self.key_prefix))

    def _share(self, item: Item) -> Share:
        value = item.get(self.counter_name)
        recorded = (item.get(self.feeds_name) or {}).get("SS")
        feeds = frozenset(entry[len(self.entry):] for entry in recorded
                          if entry.startswith(self.entry)) if recorded else _NO_FEEDS
        mark = min(str((item.get(name) or {}).get("S", "")) for name in self.marks) if self.marks else None
        return (None if value is None else value.get("N"), feeds, expired_at(self.expiring, item), mark)

    def _child(self, found: _Child, item: Item, result: Tally) -> None:
        sort = item.get(found.range_name)
        partition = item.get(found.hash_name)
        if not sort or not partition or not sort.get("S", "").startswith(found.prefix):
            return
        if found.counted is not None and not found.counted(item):
            return
        uncountable = None
        if found.loaded is not None:  # a conditional or sum counter reads its children, as PynamoDB loads them
            try:
                adds = counted_child(found.loaded.relation, item, None)
            except Uncountable as error:
                adds, uncountable = 0, str(error)
        else:
            adds = 1
        kind, value = next(iter(partition.items()))
        if self.key_prefix is None or (kind == "S" and value.startswith(self.key_prefix)):
            where = value if kind == "S" else (kind, value)
            counted = result.get(where)
            if counted is None:
                result[where] = [adds, None, None, uncountable]
            else:
                counted[CHILDREN] += adds
                counted[UNCOUNTABLE] = counted[UNCOUNTABLE] or uncountable


def _shares(tally: Tally, hash_key: Typed, slot: int) -> Dict[Any, Share]:
    """The parent items (``slot`` :data:`PARENTS`) or shard items (:data:`SHARDS`) of the partition of
    ``hash_key`` in ``tally``, made as needed."""
    where: Where = hash_key[1] if hash_key[0] == "S" else hash_key
    partition = tally.get(where)
    if partition is None:
        partition = tally[where] = [0, None, None, None]
    shares = partition[slot]
    if shares is None:
        shares = partition[slot] = {}
    return shares  # type: ignore[no-any-return]


def _raw_key(item: Item, names: Tuple[str, ...]) -> Optional[RawKey]:
    parts = []
    for name in names:
        value = item.get(name)
        if not value:
            return None
        parts.append(next(iter(value.items())))  # one type, one value
    return tuple(parts)


def _parent_of_shard(key: RawKey, index: int) -> Optional[RawKey]:
    (kind, value), rest = key[0], key[1:]
    suffix = f"{_SHARD_SUFFIX}{index}"
    if kind != "S" or not value.endswith(suffix):
        return None
    return ((kind, value[:-len(suffix)]),) + rest


def _stored(raw: Optional[str]) -> Optional[StoredNumber]:
    return None if raw is None else stored_number({"n": {"N": raw}}, "n")


def _named(relation: Relation) -> str:
    """A relation as the user declared it: ``Like.post`` (the child model's attribute)."""
    return f"{relation.child_model.__name__}.{relation.name}"
