"""Signals: who sends what, and a raising receiver never undoes a write."""
from __future__ import annotations

import logging
from typing import Any, Dict, List

import pytest

from pynamodb_counters import signals, skip_counting
from pynamodb_counters.exceptions import DuplicateChildError, MissingChildError
from tests.factories import like, post
from tests.models import Like, Post

pytestmark = pytest.mark.usefixtures("dynamodb")


class Recorder:
    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []

    def __call__(self, sender: Any, **kwargs: Any) -> None:
        self.calls.append(dict(kwargs, sender=sender))


def test_child_added_and_removed_carry_the_instance_and_its_changes() -> None:
    post()
    added, removed = Recorder(), Recorder()
    child = like()
    with signals.child_added.connected_to(added, sender=Like), \
            signals.child_removed.connected_to(removed, sender=Like):
        result = child.save()
        child.delete()
    [call] = added.calls
    assert call["sender"] is Like and call["instance"] is child and call["result"] is result
    [change] = call["changes"]
    assert (change.parent, change.key, change.attribute, change.delta) == (Post, ("POST#a91f", "META"),
                                                                           "like_tally", 1)
    assert call["result"].consumed_capacity == ()  # moto meters nothing; see test_capacity for DynamoDB's
    [call] = removed.calls
    assert [c.delta for c in call["changes"]] == [-1]


def test_rejections_send_their_signals() -> None:
    post()
    like().save()
    duplicates, missing = Recorder(), Recorder()
    with signals.duplicate_rejected.connected_to(duplicates, sender=Like), \
            signals.missing_rejected.connected_to(missing, sender=Like):
        with pytest.raises(DuplicateChildError):
            like().save()
        like().save(ignore_duplicate=True)
        with pytest.raises(MissingChildError):
            like("nobody").delete()
    assert len(duplicates.calls) == 2
    assert isinstance(duplicates.calls[0]["error"], DuplicateChildError)
    assert duplicates.calls[0]["instance"].sk == "LIKE#USER#7c20"
    assert [c["instance"].sk for c in missing.calls] == ["LIKE#USER#nobody"]


def test_a_raising_receiver_is_logged_and_the_write_stands(caplog: pytest.LogCaptureFixture) -> None:
    post()

    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("cache down")

    later = Recorder()
    with signals.child_added.connected_to(broken, sender=Like), signals.child_added.connected_to(later):
        with caplog.at_level(logging.ERROR, logger="pynamodb_counters.signals"):
            result = like().save()
    assert result.changes and Post.get("POST#a91f", "META").like_tally == 1
    assert "child_added raised" in caplog.text and "cache down" in caplog.text
    assert len(later.calls) == 1  # the other receivers still ran


def test_receivers_can_listen_to_one_model() -> None:
    post()
    other = Recorder()

    class Elsewhere(Like):
        pass

    with signals.child_added.connected_to(other, sender=Elsewhere):
        like().save()
    assert other.calls == []


def test_uncounted_writes_send_no_signal() -> None:
    post()
    added = Recorder()
    with signals.child_added.connected_to(added), skip_counting():
        like().save()
    assert added.calls == []
