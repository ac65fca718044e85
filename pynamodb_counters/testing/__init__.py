"""Test helpers for pynamodb-counters users and its own suite (the pytest plugin builds on them)."""
from .assertions import assert_counters_exact
from .backend import Backend, ExistingTableError, related_models
from .capture import SignalCapture
from .exports import export_table, write_export
from .server import ServedMoto

__all__ = ["Backend", "ExistingTableError", "ServedMoto", "SignalCapture", "assert_counters_exact", "export_table",
           "related_models", "served_engine", "write_export"]


def served_engine() -> ServedMoto:
    """A :class:`ServedMoto` ready to start (use it as a context manager)."""
    return ServedMoto()
