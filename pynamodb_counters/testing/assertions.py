"""
:func:`assert_counters_exact`: fail a test when any counter differs from its children.
"""
from __future__ import annotations

from typing import Any, List, Union

from ..declare._attributes import CounterField
from ..declare._relations import Relation
from ..declare._spec import counters_of, relations_of
from ..reconcile import AuditReport, audit

__all__ = ["assert_counters_exact"]


def assert_counters_exact(*targets: Union[type, CounterField, Relation]) -> List[AuditReport]:
    """Audit every counter of ``targets`` (parent models, child models, counters or relations) over all its
    parents, and raise ``AssertionError`` listing each drift found.

    Each relation feeding the counters needs ``prefix=`` or ``children=`` (:doc:`reconciliation`).

    :returns: the audit reports, when every counter is exact.
    """
    counters: List[CounterField] = []
    for target in targets:
        if isinstance(target, (CounterField, Relation)):
            found: List[Any] = [target.counter if isinstance(target, Relation) else target]
        else:
            found = list(counters_of(target).values()) + [r.counter for r in relations_of(target)]
            if not found:
                raise TypeError(f"{target!r} has no counters and no counted_by relations")
        counters.extend(c for c in found if all(c is not seen for seen in counters))
    reports = [audit(counter) for counter in counters]
    drifts = [drift for report in reports for drift in report.drifts]
    if drifts:
        lines = "\n".join(f"  {d.model.__name__} {list(d.key)} {d.attribute}: stored "
                          f"{'missing' if d.stored is None else d.stored}, actual {d.actual}" for d in drifts)
        raise AssertionError(f"{len(drifts)} counter(s) differ from their children:\n{lines}")
    return reports
