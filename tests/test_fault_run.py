"""Proof of exactness under faults: thousands of counted writes from several threads, through a proxy that loses
responses, resets connections, throttles, answers 5xx, cancels with conflicts and holds responses past the read
timeout. The runner is ``tests/support/fault_run.py`` (``python -m tests.support.fault_run --operations 5000 --rate
0.3`` for a larger run); ``docs/guarantees.rst`` quotes its figures.
"""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from pynamodb_counters import skip_counting
from pynamodb_counters.testing.server import ServedMoto
from tests.support.fault_run import RunConfig, Tally, Truth, Worker, check_final_state, pointed, run
from tests.support.models import ALL_MODELS, Like, Post, User

pytestmark = pytest.mark.served

CI_RUN = RunConfig(operations=2000, threads=6, rate=0.2, seed=20260623)
FAULT_KINDS = {"LOSE_RESPONSE", "RESET_BEFORE", "THROTTLE", "SERVER_ERROR", "CONFLICT", "DELAY"}


@pytest.mark.slow
def test_thousands_of_counted_writes_under_injected_faults_stay_exact(served: ServedMoto) -> None:
    summary: Dict[str, Any] = run(served, CI_RUN)
    print(json.dumps(summary, indent=2))  # the figures docs/guarantees.rst quotes (pytest -s shows them)

    assert summary["violations"] == []
    assert summary["drift_found"] == 0
    assert summary["counters_checked"] == CI_RUN.posts * 2 + CI_RUN.users
    assert summary["operations"] == CI_RUN.operations
    # the run exercised what it claims to: every fault, every outcome, drift found and repaired
    assert set(summary["faults_injected"]["TransactWriteItems"]) == FAULT_KINDS
    assert summary["faults_injected"]["UpdateItem"]
    outcomes = summary["outcomes"]
    for outcome in ("done", "done:recovered", "rejected:DuplicateChildError", "rejected:MissingChildError",
                    "failed:ambiguous"):
        assert outcomes.get(outcome, 0) > 0, outcome
    retries = summary["ambiguous_failures"]
    assert retries.get("ambiguous_applied", 0) > 0 and retries.get("ambiguous_not_applied", 0) > 0
    assert retries.get("ambiguous_applied:retry_done:recovered", 0) > 0  # the caller's same-token retry
    kinds = summary["operations_by_kind"]
    assert kinds["batch"] > 0 and kinds["batch_refused"] > 0 and kinds["stale_parent_save"] > 0
    assert summary["around_the_library"]["drifts_found"] > 0
    assert summary["around_the_library"]["repair:repaired"] > 0


def test_the_final_checks_catch_drift_and_stray_children(served: ServedMoto) -> None:
    """The checks can fail: a counter written around the library and a child no history explains are found."""
    config = RunConfig(operations=0, threads=1)
    posts, users = [("POST#F0", "META")], ["USER#F0"]
    hosts = {model: served.endpoint_url for model in ALL_MODELS}
    with pointed(hosts, config.read_timeout, retries=3):
        Post(pk="POST#F0", sk="META").save()
        User(user_id="USER#F0").save()
        truth = Truth(served.endpoint_url)
        worker = Worker(0, config, 0, truth, posts, users)
        assert check_final_state(truth, [worker], posts, users, Tally()) == {
            "counters_checked": 3, "children_stored": 0, "drift_found": 0}

        with skip_counting(Like):
            Like(pk="POST#F0", sk="LIKE#T0#0.0", liked_at=1).save()
        tally = Tally()
        checked = check_final_state(truth, [worker], posts, users, tally)
        assert checked["drift_found"] == 1
        assert any("no thread's history has it" in violation for violation in tally.violations)
        assert any("like_tally = 0, 1 children" in violation for violation in tally.violations)

        ref = worker.children[0]
        worker.exists[ref] = True  # the history now explains the like; the counter still does not
        tally = Tally()
        check_final_state(truth, [worker], posts, users, tally)
        assert len(tally.violations) == 2  # the counter, and the final audit's drift
