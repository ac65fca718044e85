"""What Lambda may do with a batch of stream records, as the property tests of the stream handlers draw it: a
:class:`Plan` per batch (:data:`delivery_plans`), the handler's retry policy that an injected failure outlasts
(:data:`FAST`), and the death of its process after an update landed (:class:`Died`)."""
from __future__ import annotations

from typing import List, NamedTuple, Optional

from hypothesis import strategies as st

from pynamodb_counters import RetryPolicy

#: two attempts per update, no wait between them: an injected failure outlasts them
FAST = RetryPolicy(max_attempts=2, base_delay=0, max_delay=0, sleep=lambda _: None)


class Plan(NamedTuple):
    """What becomes of one batch (of one function)."""

    #: the updates of one parent item the batch counts into fail (which one: drawn by the number), and Lambda
    #: delivers the batch again from the record named in ``batchItemFailures``
    fails: Optional[int]
    #: the handler dies once its update (or transaction) number ``dies`` (from 0) landed, and Lambda delivers the
    #: batch again
    dies: Optional[int]
    #: ... in two halves (BisectBatchOnFunctionError)
    bisect: bool
    #: applied, it comes again (the answer lost, or a crash before Lambda's checkpoint)
    twice: bool
    #: records that come twice
    repeated: List[int]
    #: how many records before the checkpoint it starts
    back: int


delivery_plans = st.builds(Plan, fails=st.one_of(st.none(), st.integers(0, 5)),
                           dies=st.one_of(st.none(), st.integers(0, 3)),
                           bisect=st.booleans(), twice=st.booleans(),
                           repeated=st.lists(st.integers(0, 15), max_size=2), back=st.integers(0, 4))


class Died(BaseException):
    """The handler's process, gone after DynamoDB committed one of its updates."""
