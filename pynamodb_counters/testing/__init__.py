"""Test helpers for pynamodb-counters users and its own suite."""
