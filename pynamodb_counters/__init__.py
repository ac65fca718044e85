"""
pynamodb-counters: exact reference counters for PynamoDB models.

Declare a :class:`CounterField` on the parent model and a :func:`counted_by` relation on the child model; from
then on ``child.save()`` and ``child.delete()`` keep the counters exact, each in one DynamoDB transaction. A
relation may be counted from the table's stream instead (``counting="stream"``, :mod:`pynamodb_counters.streams`),
children are written in bulk with :func:`bulk_write`, and :func:`audit` and :func:`repair` check and mend counters
without losing the writes that land meanwhile.

Everything a user needs is importable from here; the errors are in :mod:`pynamodb_counters.exceptions`, the
signals in :mod:`pynamodb_counters.signals`, the test helpers in :mod:`pynamodb_counters.testing`, the async
side's clients in :mod:`pynamodb_counters.aio`.
"""

from . import aio, exceptions, signals
from ._costs import item_bytes, read_units, write_units
from ._write_results import CounterChange, WriteResult
from .bulk import BulkOperation, BulkResult, ChildOutcome, ChildStatus, bulk_delete, bulk_save, bulk_write
from .declare._attributes import CounterField
from .declare._counted import MAX_SHARDS
from .declare._relations import Relation, counted_by
from .declare._shards import not_a_shard
from .feeders import migrate_feeders
from .models import CounterMixin
from .reconcile import ExportProgress, audit, repair
from .reconcile._reports import (
    AuditReport,
    Drift,
    FeederChange,
    FeederEntry,
    FeederReport,
    Repair,
    RepairReport,
    Unverifiable,
)
from .resharding import reshard
from .transactions import MAX_ACTIONS, CountedTransaction
from .write._send import DEFAULT_RETRY_POLICY, RetryPolicy
from .write._set_counter import set_counter
from .write._skipping import skip_counting

__version__ = "0.1.0"

__all__ = [
    "AuditReport",
    "BulkOperation",
    "BulkResult",
    "ChildOutcome",
    "ChildStatus",
    "CountedTransaction",
    "CounterChange",
    "CounterField",
    "CounterMixin",
    "DEFAULT_RETRY_POLICY",
    "Drift",
    "ExportProgress",
    "FeederChange",
    "FeederEntry",
    "FeederReport",
    "MAX_ACTIONS",
    "MAX_SHARDS",
    "Relation",
    "Repair",
    "RepairReport",
    "RetryPolicy",
    "Unverifiable",
    "WriteResult",
    "aio",
    "audit",
    "bulk_delete",
    "bulk_save",
    "bulk_write",
    "counted_by",
    "exceptions",
    "item_bytes",
    "migrate_feeders",
    "not_a_shard",
    "read_units",
    "repair",
    "reshard",
    "set_counter",
    "signals",
    "skip_counting",
    "write_units",
]
