"""
DynamoDB's raw ``CancellationReasons`` as PynamoDB's typed :class:`~pynamodb.exceptions.CancellationReason`, the
same on PynamoDB 5.5 and 6.x: :attr:`CountedWriteError.cancellation_reasons
<pynamodb_counters.exceptions.CountedWriteError.cancellation_reasons>` reads them through :func:`cancellation_reason`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from pynamodb.exceptions import CancellationReason

__all__ = ["cancellation_reason"]

#: whether this PynamoDB's CancellationReason takes ``raw_item`` (6.0 and later; 5.5's has only code and message)
_REASON_HAS_RAW_ITEM = "raw_item" in getattr(CancellationReason, "__dataclass_fields__", {})


def cancellation_reason(raw: Dict[str, Any]) -> Optional[CancellationReason]:
    """One raw ``CancellationReasons`` entry as PynamoDB's typed reason (``None`` for the code ``"None"``), built as
    PynamoDB 6 builds it, and with ``raw_item`` on PynamoDB 5.5 too."""
    code = raw.get("Code", "None")
    if code == "None":
        return None
    item = raw.get("Item")
    if _REASON_HAS_RAW_ITEM:
        return CancellationReason(code=code, message=raw.get("Message"), raw_item=item)
    reason = CancellationReason(code=code, message=raw.get("Message"))
    reason.raw_item = item
    return reason
