"""
Counting from the table's stream, exactly once: :func:`count_stream` counts the children of relations declared
``counting="stream"``, written by anyone (see :doc:`/stream-counting`), and :func:`count_expiries` takes the
counts of counted children deleted by DynamoDB's TTL off their parents (see :doc:`/expiring`); ``count_stream``
runs ``count_expiries`` on the same records, so that one Lambda serves a table.

Run as an AWS Lambda on the stream (view type ``NEW_AND_OLD_IMAGES``, with ``ReportBatchItemFailures``)::

    from pynamodb_counters.streams import count_stream

    def handler(event, context):
        return count_stream(event, models=[Like])

or on records read with ``GetRecords`` (``count_stream(response["Records"], models=[Like], table="Likes")``).
"""
from __future__ import annotations

from ._counting import count_stream
from ._expiries import SERVICE, count_expiries, not_a_marker
from ._results import ExpiryResult, Skipped, SkipReason, StreamResult

__all__ = ["SERVICE", "ExpiryResult", "SkipReason", "Skipped", "StreamResult", "count_expiries", "count_stream",
           "not_a_marker"]
