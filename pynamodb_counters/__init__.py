"""
pynamodb-counters: exact reference counters for PynamoDB models.

Declare a :class:`CounterField` on the parent model and a :func:`counted_by` relation on the child model; from
then on ``child.save()`` and ``child.delete()`` keep the counters exact, each in one DynamoDB transaction.
"""

from . import signals
from .attributes import CounterField
from .context import skip_counting
from .models import CounterMixin
from .relations import Relation, counted_by
from .repair import set_counter
from .results import CounterChange, WriteResult
from .retries import RetryPolicy
from .transactions import CountedTransaction

__version__ = "0.1.0"

__all__ = [
    "CountedTransaction",
    "CounterChange",
    "CounterField",
    "CounterMixin",
    "Relation",
    "RetryPolicy",
    "WriteResult",
    "counted_by",
    "set_counter",
    "signals",
    "skip_counting",
]
