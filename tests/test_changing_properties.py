"""Property-based tests of children that change: a hypothesis state machine creates, edits (publish, unpublish,
move, words, soft delete and restore, any subset at once), saves stale copies of, and deletes messages on moto
in-process, and checks after every step that every thread's counters equal what a plain model of the messages
predicts (the ``when=`` conditions and the ``amount=`` sum applied), and that each write reports exactly the
changes between the message it replaced and the one it stored.

Each example gets fresh tables (a moto in-process :class:`~pynamodb_counters.testing.Backend`, as the
``dynamodb`` fixture gives each test); the run is derandomized, so it is the same on every machine.

A second property saves (or deletes) a copy that another writer changed since it was loaded, for a child whose
``when=`` reads an attribute in some states only (the issue's published relation, without the soft-delete count
that Message declares beside it and that reads ``deleted_at`` in every state).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, WriteResult, audit, counted_by
from pynamodb_counters.exceptions import DuplicateChildError, MissingChildError
from pynamodb_counters.testing import Backend
from tests.support.factories import stored
from tests.support.models import TABLE_MODELS, Message, Thread

THREADS = ("THREAD#t0", "THREAD#t1", "THREAD#t2")
KEYS = ("MSG#m0", "MSG#m1", "MSG#m2", "MSG#m3", "MSG#m4")
COUNTERS = ("message_count", "published_count", "word_total")

Change = Tuple[str, str, int]  # (thread, counter, delta)


@dataclass(frozen=True)
class State:
    """What one stored message is, as far as its thread's counters are concerned (``title`` decides nothing)."""

    thread_id: str
    status: str
    words: int
    deleted_at: Optional[int]
    title: Optional[str] = None

    def counts(self) -> List[Change]:
        """What the message adds to its thread: one message while not soft-deleted, one published message while
        also published, and its words whatever its state."""
        added = [(self.thread_id, "word_total", self.words)]
        if self.deleted_at is None:
            added.append((self.thread_id, "message_count", 1))
            if self.status == "published":
                added.append((self.thread_id, "published_count", 1))
        return added

    def instance(self, key: str) -> Message:
        return Message(pk=key, sk="MSG", thread_id=self.thread_id, status=self.status, words=self.words,
                       deleted_at=self.deleted_at, title=self.title)

    @staticmethod
    def of(message: Message) -> State:
        deleted_at = None if message.deleted_at is None else int(message.deleted_at)
        return State(message.thread_id, message.status, int(message.words), deleted_at, message.title)


def transition(before: Optional[State], after: Optional[State]) -> List[Change]:
    """The net counter changes of replacing ``before`` by ``after`` (``None``: no message), without zeros."""
    net: Dict[Tuple[str, str], int] = {}
    for state, sign in ((before, -1), (after, 1)):
        for thread, counter, amount in state.counts() if state is not None else []:
            net[(thread, counter)] = net.get((thread, counter), 0) + sign * amount
    return sorted((thread, counter, delta) for (thread, counter), delta in net.items() if delta)


def reported(result: WriteResult) -> List[Change]:
    """The changes a write reported, netted per counter, without zeros (a move of a message with no words
    reports a ``-0`` and a ``+0``)."""
    net: Dict[Tuple[str, str], int] = {}
    for change in result.changes:
        assert change.parent is Thread and change.key[1] == "META" and change.shard == 0, change
        net[(change.key[0], change.attribute)] = net.get((change.key[0], change.attribute), 0) + change.delta
    return sorted((thread, counter, delta) for (thread, counter), delta in net.items() if delta)


thread_ids = st.sampled_from(THREADS)
statuses = st.sampled_from(("draft", "published"))
words = st.integers(0, 50)
deleted_ats = st.one_of(st.none(), st.integers(1, 2**31))
states = st.builds(State, thread_ids, statuses, words, deleted_ats, st.one_of(st.none(), st.sampled_from(("a", "b"))))


class ChangingMessages(RuleBasedStateMachine):
    """Up to five messages on three threads, created, edited, moved, saved from stale copies and deleted."""

    def __init__(self) -> None:
        super().__init__()
        self.backend = Backend("moto", TABLE_MODELS).__enter__()
        self.messages: Dict[str, State] = {}  # the model: what each stored message is
        self.copies: Dict[str, Tuple[Message, State]] = {}  # loaded earlier, going stale, and what each was loaded as

    def teardown(self) -> None:
        self.backend.__exit__(None, None, None)

    @initialize()
    def create_threads(self) -> None:
        for thread in THREADS:
            Thread(pk=thread, sk="META").save()

    def absent(self) -> List[str]:
        return [key for key in KEYS if key not in self.messages]

    def written(self, key: str, result: WriteResult, after: Optional[State]) -> None:
        """A write of ``key`` that committed: it reported the changes from what was stored to ``after``."""
        assert not result.recovered and not result.uncertain and not result.duplicate and not result.missing
        assert reported(result) == transition(self.messages.get(key), after), (key, self.messages.get(key), after)
        if after is None:
            self.messages.pop(key, None)
        else:
            self.messages[key] = after

    # -- rules --------------------------------------------------------------------------------------------------
    @precondition(lambda self: bool(self.absent()))
    @rule(data=st.data(), state=states)
    def create(self, data: st.DataObject, state: State) -> None:
        """A new message: any thread, status, words 0-50, soft-deleted or not."""
        key = data.draw(st.sampled_from(self.absent()))
        event(f"create: {'deleted' if state.deleted_at is not None else state.status}")
        self.written(key, state.instance(key).save(), state)

    @precondition(lambda self: bool(self.messages))
    @rule(data=st.data(), thread_id=st.one_of(st.none(), thread_ids), status=st.one_of(st.none(), statuses),
          words=st.one_of(st.none(), words), deleted_at=deleted_ats, change_deleted_at=st.booleans(),
          title=st.one_of(st.none(), st.sampled_from(("a", "b"))))
    def edit(self, data: st.DataObject, thread_id: Optional[str], status: Optional[str], words: Optional[int],
             deleted_at: Optional[int], change_deleted_at: bool, title: Optional[str]) -> None:
        """Load a stored message, change any subset of its thread (a move), status, words, deleted_at (a soft
        delete, or a restore) and title, and save it: one transaction whose counts follow the change."""
        key = data.draw(st.sampled_from(sorted(self.messages)))
        message = Message.get(key, "MSG", consistent_read=True)
        assert State.of(message) == self.messages[key]
        if thread_id is not None:
            message.thread_id = thread_id
        if status is not None:
            message.status = status
        if words is not None:
            message.words = words
        if change_deleted_at:
            message.deleted_at = deleted_at
        if title is not None:
            message.title = title
        after = State.of(message)
        event(f"edit: {describe(self.messages[key], after)}")
        self.written(key, message.save(), after)

    @precondition(lambda self: bool(self.messages))
    @rule(data=st.data())
    def load_a_copy(self, data: st.DataObject) -> None:
        """Keep a loaded copy of a message, to save later, once other writes have changed (or deleted) it."""
        key = data.draw(st.sampled_from(sorted(self.messages)))
        self.copies[key] = (Message.get(key, "MSG", consistent_read=True), self.messages[key])

    @precondition(lambda self: bool(self.copies))
    @rule(data=st.data(), status=statuses, words=words)
    def save_a_stale_copy(self, data: st.DataObject, status: str, words: int) -> None:
        """A copy loaded before later writes, changed and saved: it is stored as the copy holds it, and the counts
        follow from what is stored now (learned from the refusal), not from what the copy was loaded as; a copy of
        a message deleted since is saved as new."""
        key = data.draw(st.sampled_from(sorted(self.copies)))
        copy, loaded_as = self.copies.pop(key)
        copy.status, copy.words = status, words
        after = State.of(copy)
        current = self.messages.get(key)
        event(f"stale copy: {'deleted since' if current is None else 'same' if current == loaded_as else 'changed'}")
        self.written(key, copy.save(), after)

    @precondition(lambda self: bool(self.messages))
    @rule(data=st.data(), meanwhile=st.sampled_from(("edited", "deleted", "deleted and created again")),
          theirs=states, mine=states)
    def save_a_copy_another_writer_changed(self, data: st.DataObject, meanwhile: str, theirs: State,
                                           mine: State) -> None:
        """Load a message; another writer edits it (or deletes it, or deletes it and creates it again) before the
        copy is changed and saved: the copy is stored as it holds it, counted from what was stored just before."""
        key = data.draw(st.sampled_from(sorted(self.messages)))
        copy = Message.get(key, "MSG", consistent_read=True)
        if meanwhile == "edited":
            other = Message.get(key, "MSG", consistent_read=True)
            other.thread_id, other.status, other.words, other.deleted_at = (
                theirs.thread_id, theirs.status, theirs.words, theirs.deleted_at)
            self.written(key, other.save(), replace(theirs, title=other.title))
        else:
            self.written(key, Message.get(key, "MSG", consistent_read=True).delete(), None)
            if meanwhile == "deleted and created again":
                self.written(key, theirs.instance(key).save(), theirs)
        copy.thread_id, copy.status, copy.words, copy.deleted_at = (
            mine.thread_id, mine.status, mine.words, mine.deleted_at)
        event(f"another writer: {meanwhile}")
        self.written(key, copy.save(), State.of(copy))

    @precondition(lambda self: bool(self.messages))
    @rule(data=st.data(), how=st.sampled_from(("loaded", "key only", "edited in memory")), other=states)
    def delete(self, data: st.DataObject, how: str, other: State) -> None:
        """Delete a stored message: whatever the instance holds (its key alone, or attributes changed in memory
        and not saved), the delete takes back what the stored message counts for."""
        key = data.draw(st.sampled_from(sorted(self.messages)))
        if how == "key only":
            message = Message(pk=key, sk="MSG")
        else:
            message = Message.get(key, "MSG", consistent_read=True)
            if how == "edited in memory":
                message.thread_id, message.status, message.words, message.deleted_at = (
                    other.thread_id, other.status, other.words, other.deleted_at)
        event(f"delete: {how}")
        self.written(key, message.delete(), None)

    @precondition(lambda self: bool(self.absent()))
    @rule(data=st.data(), key_only=st.booleans(), state=states)
    def delete_a_missing_message(self, data: st.DataObject, key_only: bool, state: State) -> None:
        """Deleting a message that is not stored raises MissingChildError and changes nothing."""
        key = data.draw(st.sampled_from(self.absent()))
        message = Message(pk=key, sk="MSG") if key_only else state.instance(key)
        before = snapshot()
        with pytest.raises(MissingChildError):
            message.delete()
        assert snapshot() == before

    @precondition(lambda self: bool(self.messages))
    @rule(data=st.data(), state=states)
    def save_a_new_instance_of_a_stored_key(self, data: st.DataObject, state: State) -> None:
        """A new instance (not loaded) of a stored key is a duplicate, not an edit: refused, nothing changes."""
        key = data.draw(st.sampled_from(sorted(self.messages)))
        before = snapshot()
        with pytest.raises(DuplicateChildError):
            state.instance(key).save()
        assert snapshot() == before

    @precondition(lambda self: bool(self.messages))
    @rule(counter=st.sampled_from(COUNTERS))
    def verify_with_an_audit(self, counter: str) -> None:
        """An audit of a counter over the three threads, counting with the conditions or summing the words, finds
        no drift."""
        report = audit(getattr(Thread, counter), parents=[(thread, "META") for thread in THREADS])
        assert report.drifts == () and report.unverifiable == () and report.missing == (), report
        assert report.parents_checked == len(THREADS)

    # -- after every step ---------------------------------------------------------------------------------------
    @invariant()
    def every_counter_equals_the_model(self) -> None:
        held_counters: Dict[Tuple[str, str], int] = {}
        held_messages: Dict[str, State] = {}
        for item in stored("Threads"):
            if item["sk"]["S"] == "META":
                for counter in COUNTERS:
                    held_counters[(item["pk"]["S"], counter)] = int(item.get(counter, {"N": "0"})["N"])
            else:
                held_messages[item["pk"]["S"]] = State(
                    item["thread_id"]["S"], item["status"]["S"], int(item["words"]["N"]),
                    int(item["deleted_at"]["N"]) if "deleted_at" in item else None,
                    item["title"]["S"] if "title" in item else None)
        if not held_counters:  # before the threads exist
            return
        expected = {(thread, counter): 0 for thread in THREADS for counter in COUNTERS}
        for state in self.messages.values():
            for thread, counter, amount in state.counts():
                expected[(thread, counter)] += amount
        assert held_messages == self.messages
        assert held_counters == expected


def describe(before: State, after: State) -> str:
    """What an edit changed, for the statistics: ``move``, ``status``, ``words``, ``deleted_at``, or ``nothing``."""
    changed = [name for name, moved in (("move", before.thread_id != after.thread_id),
                                        ("status", before.status != after.status),
                                        ("words", before.words != after.words),
                                        ("deleted_at", before.deleted_at != after.deleted_at)) if moved]
    return " + ".join(changed) or "nothing counted"


def snapshot() -> List[Dict[str, Any]]:
    return sorted(stored("Threads"), key=repr)


ChangingMessages.TestCase.settings = settings(max_examples=22, stateful_step_count=30, deadline=None,
                                              derandomize=True, database=None,
                                              suppress_health_check=[HealthCheck.too_slow])
test_changing_messages = pytest.mark.slow(ChangingMessages.TestCase)  # about 17 s: run once, in the slow env


def test_the_model_counts_as_the_issue_declares() -> None:
    """The model itself, on the issue's transitions (so that the machine above checks the library against
    something right)."""
    draft = State("THREAD#t0", "draft", 120, None)
    published = replace(draft, status="published")
    assert transition(None, draft) == [("THREAD#t0", "message_count", 1), ("THREAD#t0", "word_total", 120)]
    assert transition(draft, published) == [("THREAD#t0", "published_count", 1)]
    assert transition(published, replace(published, deleted_at=1)) == [("THREAD#t0", "message_count", -1),
                                                                       ("THREAD#t0", "published_count", -1)]
    assert transition(draft, replace(draft, words=80)) == [("THREAD#t0", "word_total", -40)]
    assert transition(published, replace(published, thread_id="THREAD#t1")) == [
        ("THREAD#t0", "message_count", -1), ("THREAD#t0", "published_count", -1), ("THREAD#t0", "word_total", -120),
        ("THREAD#t1", "message_count", 1), ("THREAD#t1", "published_count", 1), ("THREAD#t1", "word_total", 120)]
    assert transition(replace(draft, deleted_at=1), None) == [("THREAD#t0", "word_total", -120)]


# -- a when= that reads an attribute in some states only ----------------------------------------------------------
class Channel(CounterMixin, Model):
    """A parent with only a published counter, in a table of its own."""

    class Meta:
        table_name = "ChangingChannels"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    published_count = CounterField()


class Notice(CounterMixin, Model):
    """The issue's published relation alone (without the soft-delete count beside it): its ``when=`` reads
    ``deleted_at`` only when the notice is published."""

    class Meta:
        table_name = "ChangingChannels"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    status = UnicodeAttribute(default="draft")
    deleted_at = NumberAttribute(null=True)
    published = counted_by(Channel.published_count, key=lambda n: "CHANNEL#c1",
                           when=lambda n: n.status == "published" and n.deleted_at is None)


notice_states = st.tuples(statuses, st.one_of(st.none(), st.integers(1, 2**31)))
NoticeState = Tuple[str, Optional[int]]


def counts(state: NoticeState) -> int:
    return int(state[0] == "published" and state[1] is None)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@example(stored_as=("draft", None), theirs=("draft", 1), mine="published", delete=False)  # soft-deleted meanwhile
@example(stored_as=("draft", None), theirs=("draft", 1), mine="published", delete=True)
@given(stored_as=notice_states, theirs=notice_states, mine=statuses, delete=st.booleans())
def test_a_copy_is_learned_again_whatever_attribute_another_writer_changed(
        stored_as: NoticeState, theirs: NoticeState, mine: str, delete: bool) -> None:
    """A copy loaded before another writer changed the notice, then changed in memory (its status) and saved
    (or deleted): the write is learned again from the refusal and lands, counted from what is stored, whichever
    attribute the other writer changed, including one that only the copy's new state reads (``deleted_at`` of a
    notice the copy publishes, where the loaded and the stored state are drafts)."""
    with Backend("moto", [Channel]):
        Channel(pk="CHANNEL#c1").save()
        Notice(pk="N#1", status=stored_as[0], deleted_at=stored_as[1]).save()
        copy = Notice.get("N#1", consistent_read=True)
        other = Notice.get("N#1", consistent_read=True)
        other.status, other.deleted_at = theirs
        other.save()
        copy.status = mine
        if delete:
            copy.delete()  # takes back what the stored notice counts for, whatever the copy holds
            expected = 0
        else:
            copy.save()  # stored as the copy holds it: its status, and the deleted_at it was loaded with
            expected = counts((mine, stored_as[1]))
            stored = Notice.get("N#1", consistent_read=True)
            assert (stored.status, stored.deleted_at) == (mine, stored_as[1])
        assert Channel.get("CHANNEL#c1", consistent_read=True).published_count == expected
