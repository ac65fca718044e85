"""Signals: who sends what, as blinker sends it (muted, coroutine receivers refused), and a raising receiver never
undoes a write."""
from __future__ import annotations

import gc
import logging
import warnings
from typing import Any, Dict, List

import pytest

from pynamodb_counters import signals, skip_counting
from pynamodb_counters.exceptions import DuplicateChildError, MissingChildError
from tests.support.factories import like, likes, post, tally
from tests.support.models import Like, Post

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


# -- signals behave as blinker's ------------------------------------------------------------------------------------
def test_a_muted_signal_calls_no_receiver() -> None:
    post()
    heard: List[Any] = []
    with signals.child_added.connected_to(lambda sender, **kw: heard.append(kw["instance"]), sender=Like):
        with signals.child_added.muted():
            like(1).save()
        like(2).save()
    assert [child.sk for child in heard] == ["LIKE#USER#2"]
    assert (tally(), likes()) == (2, 2)


def test_a_coroutine_receiver_gets_blinkers_answer_not_a_never_awaited_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    post()
    called: List[Any] = []

    async def on_like(sender: Any, **kwargs: Any) -> None:  # pragma: no cover - never run
        called.append(kwargs)

    with signals.child_added.connected_to(on_like, sender=Like):
        with pytest.raises(RuntimeError) as blinker_answer:
            signals.child_added.send(Like)  # what blinker itself answers at send
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, "pynamodb_counters"):
            warnings.simplefilter("always")
            result = like(1).save()
            gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert called == []
    [record] = [r for r in caplog.records if r.name == "pynamodb_counters.signals"]
    assert record.exc_info is not None and str(record.exc_info[1]) == str(blinker_answer.value)
    assert "child_added" in record.getMessage()
    assert result.changes and (tally(), likes()) == (1, 1)  # the write stands


def test_a_receiver_returning_a_coroutine_is_closed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    post()

    async def later() -> None:  # pragma: no cover - never run
        pass

    with signals.child_added.connected_to(lambda sender, **kw: later(), sender=Like):
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, "pynamodb_counters"):
            warnings.simplefilter("always")
            like(1).save()
            gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    [record] = [r for r in caplog.records if r.name == "pynamodb_counters.signals"]
    assert record.exc_info is not None and "returned a coroutine" in str(record.exc_info[1])
    assert (tally(), likes()) == (1, 1)


def test_a_raising_receiver_still_never_undoes_the_write(caplog: pytest.LogCaptureFixture) -> None:
    post()

    def broken(sender: Any, **kwargs: Any) -> None:
        raise KeyError("receiver bug")

    with signals.child_removed.connected_to(broken, sender=Like), signals.child_added.connected_to(broken):
        like(1).save()
        like(2).save()
        like(1).delete()
    assert (tally(), likes()) == (1, 1)
    assert sum("receiver" in r.getMessage() for r in caplog.records) == 3
