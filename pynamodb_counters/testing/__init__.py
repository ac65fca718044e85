"""Test helpers for pynamodb-counters users and its own suite (the pytest plugin builds on them)."""
from .assertions import assert_counters_exact
from .backend import Backend, ExistingTableError, related_models
from .capture import SignalCapture
from .exports import export_table, write_export
from .server import ServedMoto
from .streams import StreamReader, lambda_event, stream_records

__all__ = ["Backend", "ExistingTableError", "ServedMoto", "SignalCapture", "StreamReader", "assert_counters_exact",
           "export_table", "lambda_event", "related_models", "served_engine", "stream_records", "write_export"]


def served_engine() -> ServedMoto:
    """A :class:`ServedMoto` ready to start (use it as a context manager)."""
    return ServedMoto()
