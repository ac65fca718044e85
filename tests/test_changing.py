"""Children that change: conditional counters (``when=``), sum counters (``amount=``), and edits of stored children
(publish, unpublish, move, soft delete and restore, sums up and down) whose counts follow the change, in one
transaction, exactly under concurrent writers."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest
from pynamodb.attributes import BooleanAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import (
    CountedTransaction,
    CounterChange,
    CounterField,
    CounterMixin,
    audit,
    bulk_save,
    bulk_write,
    counted_by,
    signals,
)
from pynamodb_counters.exceptions import (
    ChildValueError,
    ConditionFailedError,
    CounterUnderflowError,
    CountingBypassError,
    DuplicateChildError,
    ParentNotFoundError,
)
from pynamodb_counters.write._stored import read_by
from tests.support.factories import raw_client, snapshot, swapped
from tests.support.models import REGION, Message, Thread, Vote

pytestmark = pytest.mark.usefixtures("dynamodb")

COUNTERS = ("message_count", "published_count", "word_total")


def thread(name: str = "t1") -> Tuple[str, str]:
    Thread(pk=f"THREAD#{name}", sk="META").save()
    return (f"THREAD#{name}", "META")


def message(n: int = 1, in_thread: str = "t1", **attributes: Any) -> Message:
    return Message(pk=f"MSG#{n}", sk="MSG", thread_id=f"THREAD#{in_thread}", **attributes)


def counts(name: str = "t1") -> Tuple[int, ...]:
    stored = Thread.get(f"THREAD#{name}", "META", consistent_read=True)
    return tuple(getattr(stored, counter) for counter in COUNTERS)


def loaded(n: int = 1) -> Message:
    return Message.get(f"MSG#{n}", "MSG", consistent_read=True)


@pytest.fixture
def sent() -> Iterator[List[Tuple[str, int]]]:
    """The TransactWriteItems sent, with their number of actions (seen through the transport seam)."""
    from pynamodb_counters.transport import Call, Interceptor, intercepting

    calls: List[Tuple[str, int]] = []

    class Record(Interceptor):
        def request(self, call: Call) -> None:
            if call.operation == "TransactWriteItems":
                calls.append(("TransactWriteItems", len(call.parameters["TransactItems"])))

    with intercepting(Record()):
        yield calls


@pytest.fixture
def received() -> Iterator[Dict[str, List[Tuple[CounterChange, ...]]]]:
    seen: Dict[str, List[Tuple[CounterChange, ...]]] = {"added": [], "removed": [], "changed": []}

    def on(kind: str) -> Any:
        def receiver(sender: Any, instance: Any, changes: Tuple[CounterChange, ...], **_: Any) -> None:
            seen[kind].append(changes)
        return receiver

    receivers = {"added": on("added"), "removed": on("removed"), "changed": on("changed")}
    signals.child_added.connect(receivers["added"], sender=Message)
    signals.child_removed.connect(receivers["removed"], sender=Message)
    signals.child_changed.connect(receivers["changed"], sender=Message)
    yield seen
    signals.child_added.disconnect(receivers["added"], sender=Message)
    signals.child_removed.disconnect(receivers["removed"], sender=Message)
    signals.child_changed.disconnect(receivers["changed"], sender=Message)


# -- conditions and sums on create and delete ----------------------------------------------------------------
def test_a_draft_counts_as_a_message_and_its_words_but_not_as_published() -> None:
    thread()
    result = message(words=120).save()
    assert counts() == (1, 0, 120)
    assert sorted((c.attribute, c.delta) for c in result.changes) == [("message_count", 1), ("word_total", 120)]


def test_a_published_message_counts_everywhere_and_its_delete_takes_it_all_back() -> None:
    thread()
    message(status="published", words=50).save()
    assert counts() == (1, 1, 50)
    loaded().delete()
    assert counts() == (0, 0, 0)


def test_a_child_that_counts_for_nothing_writes_its_item_alone(sent: List[Tuple[str, int]]) -> None:
    thread()
    message(deleted_at=1, words=0).save()  # soft-deleted from the start, no words: it adds nothing anywhere
    assert counts() == (0, 0, 0)
    assert sent == [("TransactWriteItems", 2)]  # the Put, and the words Update (adding 0 moves the sequence)


# -- edits ---------------------------------------------------------------------------------------------------
def test_publishing_counts_the_message_as_published_in_one_transaction(
        sent: List[Tuple[str, int]], received: Dict[str, List[Any]]) -> None:
    thread()
    message(words=10).save()
    sent.clear()
    stored = loaded()
    stored.status = "published"
    result = stored.save()
    assert counts() == (1, 1, 10)
    assert sent == [("TransactWriteItems", 2)]  # the message's Update and the thread's
    assert result.changes == (CounterChange(Thread, ("THREAD#t1", "META"), "published_count", 1, 0),)
    assert received["added"][-1] == result.changes and received["removed"] == [] and received["changed"] == []
    assert loaded().status == "published"


def test_unpublishing_takes_it_back() -> None:
    thread()
    message(status="published").save()
    stored = loaded()
    stored.status = "draft"
    stored.save()
    assert counts() == (1, 0, 0)


def test_an_instance_saved_is_an_edit_the_next_time() -> None:
    thread()
    fresh = message(words=5)
    fresh.save()
    fresh.status = "published"
    fresh.words = 7
    fresh.save()  # the same instance, saved again: an edit, not a duplicate
    assert counts() == (1, 1, 7)


def test_moving_a_message_moves_every_count(received: Dict[str, List[Any]]) -> None:
    thread("t1")
    thread("t2")
    message(status="published", words=30).save()
    stored = loaded()
    stored.thread_id = "THREAD#t2"
    result = stored.save()
    assert counts("t1") == (0, 0, 0) and counts("t2") == (1, 1, 30)
    assert sorted((c.key[0], c.attribute, c.delta) for c in result.changes) == [
        ("THREAD#t1", "message_count", -1), ("THREAD#t1", "published_count", -1), ("THREAD#t1", "word_total", -30),
        ("THREAD#t2", "message_count", 1), ("THREAD#t2", "published_count", 1), ("THREAD#t2", "word_total", 30)]
    assert len(received["removed"][-1]) == 3 and len(received["added"][-1]) == 3


def test_words_down_and_up_change_the_sum_by_the_difference(received: Dict[str, List[Any]]) -> None:
    thread()
    message(words=120).save()
    stored = loaded()
    stored.words = 80
    result = stored.save()
    assert counts() == (1, 0, 80)
    assert result.changes == (CounterChange(Thread, ("THREAD#t1", "META"), "word_total", -40, 0),)
    assert received["changed"][-1] == result.changes
    stored.words = 200
    stored.save()
    assert counts() == (1, 0, 200)


def test_soft_delete_restore_and_hard_delete_after_soft_delete() -> None:
    thread()
    message(status="published", words=12).save()
    stored = loaded()
    stored.deleted_at = 1764547200
    stored.save()  # soft delete: no longer a message nor published; its words still add up
    assert counts() == (0, 0, 12)
    stored.deleted_at = None
    stored.save()  # restored
    assert counts() == (1, 1, 12)
    stored.deleted_at = 1764547201
    stored.save()
    loaded().delete()  # the hard delete after the soft one takes back only what still counted
    assert counts() == (0, 0, 0)


def test_an_edit_that_changes_nothing_counted_writes_the_message_alone(sent: List[Tuple[str, int]]) -> None:
    thread()
    message(words=3).save()
    sent.clear()
    stored = loaded()
    stored.title = "renamed"
    result = stored.save()
    assert result.changes == () and sent == [("TransactWriteItems", 1)]
    assert counts() == (1, 0, 3) and loaded().title == "renamed"


def test_several_relations_and_a_move_at_once() -> None:
    thread("t1")
    thread("t2")
    message(words=4).save()
    stored = loaded()
    stored.thread_id, stored.status, stored.words = "THREAD#t2", "published", 9
    stored.save()
    assert counts("t1") == (0, 0, 0) and counts("t2") == (1, 1, 9)


def test_a_new_instance_of_a_stored_key_is_still_a_duplicate() -> None:
    thread()
    message(words=1).save()
    before = snapshot()
    with pytest.raises(DuplicateChildError):
        message(words=99, status="published").save()
    assert snapshot() == before and counts() == (1, 0, 1)


# -- exact under concurrent writers --------------------------------------------------------------------------
def test_an_edit_counts_from_the_stored_state_when_another_writer_changed_it(sent: List[Tuple[str, int]]) -> None:
    thread()
    message(words=100).save()
    mine, theirs = loaded(), loaded()
    theirs.status, theirs.words = "published", 60
    theirs.save()  # another writer published it and cut its words, after mine was loaded
    sent.clear()
    mine.title = "my title"
    mine.words = 150
    result = mine.save()  # computed from words=100, draft: refused, learned from the stored item, sent again
    assert [count for _, count in sent] == [2, 2] and result.attempts == 2
    assert counts() == (1, 0, 150)  # the last save wins, and the counters follow what is stored
    assert loaded().status == "draft"


def test_a_delete_of_a_loaded_message_counts_off_what_is_stored_not_what_the_instance_holds() -> None:
    thread("t1")
    thread("t2")
    message(status="published", words=8).save()
    stored = loaded()
    stored.thread_id, stored.status, stored.words = "THREAD#t2", "draft", 1000  # edited in memory, not saved
    stored.delete()
    assert counts("t1") == (0, 0, 0) and counts("t2") == (0, 0, 0)


def test_an_edit_of_a_message_deleted_meanwhile_saves_it_again_as_new() -> None:
    thread()
    message(words=2).save()
    mine = loaded()
    loaded().delete()
    assert counts() == (0, 0, 0)
    mine.words = 5
    mine.save()
    assert counts() == (1, 0, 5)


def test_an_edit_refused_by_the_callers_condition_writes_nothing() -> None:
    thread()
    message(words=2).save()
    stored = loaded()
    stored.status = "published"
    before = snapshot()
    with pytest.raises(ConditionFailedError, match="condition on saving"):
        stored.save(condition=Message.title.exists())
    assert snapshot() == before


# -- bad input -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("words, complaint", [(2.5, "returned 2.5"), (True, "returned True")])
def test_an_amount_that_is_not_a_whole_number_is_refused_and_nothing_is_written(words: Any, complaint: str) -> None:
    thread()
    before = snapshot()
    bad = message()
    bad.attribute_values["words"] = words  # as a user's code might leave it
    with pytest.raises(ChildValueError, match=complaint):
        bad.save()
    assert snapshot() == before


def test_a_when_that_raises_or_is_not_a_bool_is_refused() -> None:
    thread()
    before = snapshot()
    with swapped(Message.published, "_when", lambda m: m.status):  # returns a string, not a bool
        with pytest.raises(ChildValueError, match="must return True or False"):
            message().save()
    with swapped(Message.published, "_when", lambda m: 1 / 0):
        with pytest.raises(ChildValueError, match="ZeroDivisionError"):
            message().save()
    assert snapshot() == before


def test_a_move_to_a_thread_that_does_not_exist_is_refused_and_nothing_is_written() -> None:
    thread()
    message(words=3).save()
    stored = loaded()
    stored.thread_id = "THREAD#nowhere"
    before = snapshot()
    with pytest.raises(ParentNotFoundError, match="THREAD#nowhere"):
        stored.save()
    assert snapshot() == before and counts() == (1, 0, 3)


def test_update_to_a_known_value_moves_the_counts_in_the_same_transaction(sent: List[Tuple[str, int]]) -> None:
    thread("t1")
    thread("t2")
    message(words=4).save()
    stored = loaded()
    sent.clear()
    result = stored.update(actions=[Message.status.set("published"), Message.title.set("hello")])
    assert sent == [("TransactWriteItems", 2)] and counts() == (1, 1, 4)
    assert result.changes == (CounterChange(Thread, ("THREAD#t1", "META"), "published_count", 1, 0),)
    assert (stored.status, stored.title) == ("published", "hello")
    stored.update(actions=[Message.thread_id.set("THREAD#t2"), Message.deleted_at.remove()])  # a move
    assert counts("t1") == (0, 0, 0) and counts("t2") == (1, 1, 4)
    assert loaded().thread_id == "THREAD#t2"


def test_update_of_an_instance_never_loaded_reads_the_stored_child_first() -> None:
    thread()
    message(status="published", words=6).save()
    Message(pk="MSG#1", sk="MSG").update(actions=[Message.deleted_at.set(1764547200)])  # soft delete by key
    assert counts() == (0, 0, 6)


def test_update_of_other_attributes_is_pynamodbs_own() -> None:
    thread()
    message(words=2).save()
    stored = loaded()
    response = stored.update(actions=[Message.title.set("plain")])
    assert isinstance(response, dict) and "Attributes" in response  # PynamoDB's UpdateItem response
    assert counts() == (1, 0, 2) and stored.title == "plain"


@pytest.mark.parametrize("action", [lambda: Message.words.add(5), lambda: Message.words.set(Message.words + 5),
                                    lambda: Message.status.set(Message.title)],
                         ids=["ADD", "arithmetic", "copy of another attribute"])
def test_update_refuses_what_it_cannot_know_before_sending_and_names_the_way(action: Any) -> None:
    thread()
    message(words=1).save()
    stored = loaded()
    before = snapshot()
    with pytest.raises(CountingBypassError, match=r"save\(\)"):
        stored.update(actions=[action()])
    assert snapshot() == before


def test_an_update_counts_from_the_stored_state_when_another_writer_changed_it() -> None:
    thread()
    message(words=10).save()
    mine, theirs = loaded(), loaded()
    theirs.status = "published"
    theirs.save()
    mine.update(actions=[Message.words.set(3)])  # computed from draft, 10 words: refused, learned, sent again
    assert counts() == (1, 1, 3)


def test_a_transaction_carries_a_counted_update() -> None:
    thread()
    message(1, words=1).save()
    with CountedTransaction() as transaction:
        transaction.update(loaded(1), [Message.status.set("published")])
        transaction.save(message(2, words=2))
    assert counts() == (2, 1, 3)


def test_a_sum_keeps_its_floor_of_zero() -> None:
    thread()
    before = snapshot()
    with pytest.raises(CounterUnderflowError):
        Vote(pk="THREAD#t1", sk="VOTE#USER#1", value=-1).save()  # a score of 0 cannot go to -1
    assert snapshot() == before
    Vote(pk="THREAD#t1", sk="VOTE#USER#2", value=1).save()
    Vote(pk="THREAD#t1", sk="VOTE#USER#1", value=-1).save()
    stored = Thread.get("THREAD#t1", "META", consistent_read=True)
    assert (stored.score, stored.upvotes) == (0, 1)


# -- the other paths: transactions, bulk, audits ----------------------------------------------------------------
def test_a_transaction_carries_edits_and_new_children_together() -> None:
    thread()
    message(1, words=1).save()
    stored = loaded(1)
    stored.status = "published"
    with CountedTransaction() as transaction:
        transaction.save(stored)
        transaction.save(message(2, words=2))
    assert counts() == (2, 1, 3)


def test_bulk_saves_edits_and_reports_them_as_changed() -> None:
    thread()
    bulk_save([message(n, words=n) for n in range(1, 5)])
    edited = [loaded(n) for n in range(1, 5)]
    for each in edited:
        each.status = "published"
        each.words += 1
    result = bulk_write(saves=edited + [message(9, words=9)])
    assert sorted(o.status for o in result.outcomes) == ["added", "changed", "changed", "changed", "changed"]
    assert counts() == (5, 4, 1 + 2 + 3 + 4 + 4 + 9)


def test_audits_count_with_when_and_sum_with_amount() -> None:
    thread()
    Vote(pk="THREAD#t1", sk="VOTE#USER#1", value=1).save()
    Vote(pk="THREAD#t1", sk="VOTE#USER#2", value=1).save()
    Vote(pk="THREAD#t1", sk="VOTE#USER#3", value=-1).save()
    message(1, status="published", words=10).save()
    message(2, words=5).save()
    for counter in (Thread.score, Thread.upvotes, Thread.message_count, Thread.published_count, Thread.word_total):
        assert audit(counter, parents=[("THREAD#t1", "META")]).drifts == (), counter
    Thread._get_connection().update_item("THREAD#t1", range_key="META", actions=[Thread.upvotes.set(3)])
    [drift] = audit(Thread.upvotes, parents=[("THREAD#t1", "META")]).drifts
    assert (drift.stored, drift.actual) == (3, 2)


# -- where an instance comes from, and what an edit keeps ---------------------------------------------------------
def test_query_scan_batch_get_and_refresh_all_make_an_edit() -> None:
    thread()
    for n in (1, 2, 3, 4):
        message(n, words=1).save()
    from_query = next(iter(Message.query("MSG#1", consistent_read=True)))
    from_scan = next(m for m in Message.scan(consistent_read=True) if m.pk == "MSG#2")
    from_batch = next(iter(Message.batch_get([("MSG#3", "MSG")], consistent_read=True)))
    refreshed = Message(pk="MSG#4", sk="MSG")
    refreshed.refresh(consistent_read=True)
    for each in (from_query, from_scan, from_batch, refreshed):
        each.status = "published"
        each.save()
    assert counts() == (4, 4, 4)


def test_editing_a_child_that_is_also_a_parent_keeps_the_counts_it_holds() -> None:
    from tests.support.models import Comment, Post, Reply

    Post(pk="POST#p", sk="META").save()
    Comment(pk="POST#p", sk="COMMENT#c1", text="first").save()
    mine = Comment.get("POST#p", "COMMENT#c1", consistent_read=True)  # reply_count 0, as loaded
    Reply(pk="POST#p", sk="REPLY#c1#r1", comment_sk="COMMENT#c1").save()  # counted on the comment meanwhile
    mine.text = "edited"
    mine.save()  # an edit: the comment's own counter is not overwritten with the 0 it was loaded with
    stored = Comment.get("POST#p", "COMMENT#c1", consistent_read=True)
    assert (stored.text, stored.reply_count) == ("edited", 1)
    assert Post.get("POST#p", "META", consistent_read=True).comment_count == 1


def test_a_stale_version_is_refused_as_pynamodb_refuses_it() -> None:
    from tests.support.models import Doc, Edit

    Doc(doc_id="d1").save()
    Edit(doc_id="d1", seq=1).save()
    first, second = (Edit.get("d1", 1, consistent_read=True) for _ in range(2))
    first.save()  # version 1 -> 2
    before = snapshot()
    with pytest.raises(ConditionFailedError):
        second.save()  # still at version 1
    assert snapshot() == before


def test_a_move_is_three_actions(sent: List[Tuple[str, int]]) -> None:
    thread("t1")
    thread("t2")
    message(status="published", words=3).save()
    sent.clear()
    stored = loaded()
    stored.thread_id = "THREAD#t2"
    stored.save()
    assert sent == [("TransactWriteItems", 3)]  # the message, the old thread, the new thread


def test_moves_count_three_actions_each_against_the_limit_and_a_transaction_too_large_writes_nothing() -> None:
    from pynamodb_counters.exceptions import TransactionTooLargeError

    for n in range(34):
        thread(f"a{n}")
        thread(f"b{n}")
        message(n, in_thread=f"a{n}", words=1).save()
    moved = []
    for n in range(34):
        each = loaded(n)
        each.thread_id = f"THREAD#b{n}"
        moved.append(each)
    before = snapshot()
    with pytest.raises(TransactionTooLargeError, match="102 actions"):
        with CountedTransaction() as transaction:
            for each in moved:
                transaction.save(each)
    assert snapshot() == before
    result = bulk_write(saves=moved)  # bulk writes size their chunks with both parents of each move
    assert [o.status for o in result.outcomes] == ["changed"] * 34 and len(result.results) == 2
    assert all(counts(f"a{n}") == (0, 0, 0) and counts(f"b{n}") == (1, 0, 1) for n in range(34))


def test_a_move_between_parents_in_another_table_and_of_a_child_whose_parent_is_a_child() -> None:
    from tests.support.models import Bookmark, Comment, Post, Reply, User

    Post(pk="POST#p", sk="META").save()
    User(user_id="U1").save()
    User(user_id="U2").save()
    Bookmark(pk="POST#p", sk="BOOKMARK#1", user_id="U1").save()
    mark = Bookmark.get("POST#p", "BOOKMARK#1", consistent_read=True)
    mark.user_id = "U2"  # the owner relation's parent is in the Users table
    result = mark.save()
    assert (User.get("U1").bookmarks, User.get("U2").bookmarks) == (0, 1)
    assert Post.get("POST#p", "META").bookmark_count == 1  # the post relation did not move: no change for it
    assert {(c.parent.__name__, c.key, c.delta) for c in result.changes} == {("User", ("U1",), -1),
                                                                           ("User", ("U2",), 1)}
    for sk in ("COMMENT#c1", "COMMENT#c2"):
        Comment(pk="POST#p", sk=sk, text=sk).save()
    Reply(pk="POST#p", sk="REPLY#1", comment_sk="COMMENT#c1").save()
    reply = Reply.get("POST#p", "REPLY#1", consistent_read=True)
    reply.comment_sk = "COMMENT#c2"  # its parent, a comment, is itself a child of the post
    reply.save()
    assert [Comment.get("POST#p", sk).reply_count for sk in ("COMMENT#c1", "COMMENT#c2")] == [0, 1]
    assert Post.get("POST#p", "META").comment_count == 2


def test_repair_of_conditional_and_sum_counters_sets_what_the_children_add_up_to() -> None:
    from pynamodb_counters import repair

    thread()
    for n, value in enumerate((1, 1, -1, 1)):
        Vote(pk="THREAD#t1", sk=f"VOTE#USER#{n}", value=value).save()
    message(1, status="published", words=7).save()
    message(2, words=5, deleted_at=1).save()
    Thread._get_connection().update_item("THREAD#t1", range_key="META", actions=[
        Thread.score.set(9), Thread.upvotes.set(0), Thread.published_count.set(4), Thread.word_total.set(1)])
    parents = [("THREAD#t1", "META")]
    for counter, actual in ((Thread.score, 2), (Thread.upvotes, 3), (Thread.published_count, 1),
                            (Thread.word_total, 12)):
        report = audit(counter, parents=parents)
        assert [drift.actual for drift in report.drifts] == [actual], counter
        assert [r.status for r in repair(report.drifts).repairs] == ["repaired"]
        assert audit(counter, parents=parents).drifts == ()


def test_an_edit_sent_as_new_after_a_delete_becomes_an_edit_again_if_the_child_is_created_meanwhile() -> None:
    from tests.support.client_hooks import before_transactions

    thread()
    message(words=2).save()
    mine = loaded()
    loaded().delete()  # deleted after mine was loaded: my edit is refused, learned as absent, sent as new
    # between my edit's refusal and its create: another writer creates the message
    with before_transactions({2: lambda: message(status="published", words=40).save()}) as sent:
        mine.words = 5
        result = mine.save()  # refused as a duplicate, learned as an edit of what is stored now, sent again
    assert len(sent) == 3 and result.attempts == 3
    assert counts() == (1, 0, 5)  # the last save wins: a draft of 5 words, counted from the stored published one
    assert (loaded().status, loaded().words) == ("draft", 5)


def test_an_edit_honours_add_version_condition_as_pynamodbs_save_does() -> None:
    from tests.support.models import Doc, Edit

    Doc(doc_id="d1").save()
    Edit(doc_id="d1", seq=1).save()
    first, second = (Edit.get("d1", 1, consistent_read=True) for _ in range(2))
    first.save()
    second.save(add_version_condition=False)  # stale, but told not to check: it lands, as with PynamoDB
    assert Edit.get("d1", 1, consistent_read=True).version == 2
    assert Doc.get("d1").edit_count == 1


# -- PynamoDB's loaded view: defaults, NULL, attributes added later -------------------------------------------------
# Every count is decided from the stored child as PynamoDB loads it (an absent or NULL attribute reads as its
# default, or None), as an audit recounts it. Each state below loads as a draft with no words, not deleted, and is
# counted as such; each operation must work on it, exactly, with no condition of the caller's to fail.
KEY = {"pk": {"S": "MSG#1"}, "sk": {"S": "MSG"}}


def _written_by_the_library() -> None:
    message(words=0).save()


def _stored_without_status_and_words() -> None:
    """As an older deploy wrote it, before ``status`` and ``words`` were added to the model."""
    message(words=0).save()
    raw_client(None).update_item(TableName="Threads", Key=KEY, UpdateExpression="REMOVE #s, words",
                                 ExpressionAttributeNames={"#s": "status"})


def _stored_with_status_and_words_null() -> None:
    message(words=0).save()
    raw_client(None).update_item(TableName="Threads", Key=KEY, UpdateExpression="SET #s = :null, words = :null",
                                 ExpressionAttributeNames={"#s": "status"},
                                 ExpressionAttributeValues={":null": {"NULL": True}})


def _restored_with_update_to_none() -> None:
    """Soft-deleted, then restored with ``update(deleted_at=None)``: PynamoDB stores a NULL."""
    message(words=0).save()
    loaded().update(actions=[Message.deleted_at.set(1764547200)])
    loaded().update(actions=[Message.deleted_at.set(None)])
    assert raw_client(None).get_item(TableName="Threads", Key=KEY)["Item"]["deleted_at"] == {"NULL": True}


STATES = {"written by the library": _written_by_the_library,
          "stored without status and words (added to the model later)": _stored_without_status_and_words,
          "stored with status and words NULL": _stored_with_status_and_words_null,
          "restored with update(deleted_at=None), stored NULL": _restored_with_update_to_none}


def _edit(**changes: Any) -> Any:
    def run() -> None:
        stored = loaded()
        for name, value in changes.items():
            setattr(stored, name, value)
        stored.save()
    return run


def _soft_delete_in_a_transaction() -> None:
    with CountedTransaction() as transaction:
        transaction.update(loaded(), [Message.deleted_at.set(1764547200)])


OPERATIONS = {
    "edit its title": (_edit(title="t"), (1, 0, 0)),
    "publish it": (_edit(status="published"), (1, 1, 0)),
    "give it words": (_edit(words=7), (1, 0, 7)),
    "soft delete it with save()": (_edit(deleted_at=1764547200), (0, 0, 0)),
    "delete it as loaded": (lambda: loaded().delete(), (0, 0, 0)),
    "delete it by its key": (lambda: Message(pk="MSG#1", sk="MSG").delete(), (0, 0, 0)),
    "update its title": (lambda: loaded().update(actions=[Message.title.set("t")]), (1, 0, 0)),
    "publish it with update()": (lambda: loaded().update(actions=[Message.status.set("published")]), (1, 1, 0)),
    "publish it with update() by its key": (
        lambda: Message(pk="MSG#1", sk="MSG").update(actions=[Message.status.set("published")]), (1, 1, 0)),
    "soft delete it in a transaction": (_soft_delete_in_a_transaction, (0, 0, 0)),
    "bulk delete it": (lambda: bulk_write(deletes=[loaded()]), (0, 0, 0)),
}


@pytest.mark.parametrize("operation", list(OPERATIONS), ids=list(OPERATIONS))
@pytest.mark.parametrize("state", list(STATES), ids=list(STATES))
def test_a_stored_message_counts_as_pynamodb_loads_it_whatever_its_item_holds(state: str, operation: str) -> None:
    thread()
    STATES[state]()
    stored = loaded()
    assert (stored.status, stored.words, stored.deleted_at) == ("draft", 0, None) and counts() == (1, 0, 0)
    run, expected = OPERATIONS[operation]
    run()
    assert counts() == expected
    for counter in (Thread.message_count, Thread.published_count, Thread.word_total):
        assert audit(counter, parents=[("THREAD#t1", "META")]).drifts == (), counter


def test_an_update_that_removes_a_defaulted_attribute_counts_it_with_its_default() -> None:
    thread()
    message(status="published", words=7).save()
    result = loaded().update(actions=[Message.status.remove(), Message.words.remove()])
    assert (loaded().status, loaded().words) == ("draft", 0)
    assert counts() == (1, 0, 0)
    assert sorted((c.attribute, c.delta) for c in result.changes) == [("published_count", -1), ("word_total", -7)]


def test_a_save_with_a_non_null_attribute_set_to_none_is_refused_as_pynamodb_refuses_it() -> None:
    from pynamodb.exceptions import AttributeNullError

    thread()
    before = snapshot()
    new = message()
    new.words = None  # words is not null=True: PynamoDB's save() refuses it, with or without the library
    with pytest.raises(AttributeNullError):
        new.save()
    assert snapshot() == before


class Pad(CounterMixin, Model):
    class Meta:
        table_name = "Pads"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    drafts = CounterField()


class Note(CounterMixin, Model):
    """A child counted while it is a draft, the default of its status (as in the issue's reproduction)."""

    class Meta:
        table_name = "Notes"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    pad = UnicodeAttribute()
    status = UnicodeAttribute(null=True, default="draft")
    draft = counted_by(Pad.drafts, key=lambda n: n.pad, when=lambda n: n.status == "draft",
                       children=lambda key: sum(1 for n in Note.scan(consistent_read=True)
                                                if n.pad == key[0] and n.status == "draft"))


@pytest.fixture
def pads(dynamodb: Any) -> None:
    Pad.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Note.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Pad(pk="p").save()


def _drafts() -> int:
    return Pad.get("p", consistent_read=True).drafts


@pytest.mark.usefixtures("pads")
def test_a_child_counted_by_its_defaults_value_counts_when_the_attribute_is_removed_or_saved_as_none() -> None:
    Note(pk="a", pad="p", status="published").save()
    assert _drafts() == 0
    Note.get("a").update(actions=[Note.status.remove()])  # reset to its default: a draft again
    assert Note.get("a", consistent_read=True).status == "draft" and _drafts() == 1
    Note(pk="b", pad="p", status=None).save()  # stored without a status: loads as a draft
    assert Note.get("b", consistent_read=True).status == "draft" and _drafts() == 2
    assert audit(Pad.drafts, parents=["p"]).drifts == ()
    Note.get("b").delete()
    Note(pk="a").delete()
    assert _drafts() == 0


# -- any attribute name, and inputs read through a property or a method ------------------------------------------
@pytest.mark.parametrize("flag", ["seen", "_target", "target", "_seen", "attribute_values_seen"])
def test_an_attribute_of_any_name_is_seen_as_an_input(flag: str) -> None:
    class Reader(CounterMixin, Model):
        Meta = type("Meta", (), {"table_name": f"Readers{len(flag)}", "region": REGION})
        pk = UnicodeAttribute(hash_key=True)
        unread = CounterField()

    namespace = {"Meta": type("Meta", (), {"table_name": f"Notices{len(flag)}", "region": REGION}),
                 "pk": UnicodeAttribute(hash_key=True), "reader": UnicodeAttribute(),
                 flag: BooleanAttribute(default=False),
                 "inbox": counted_by(Reader.unread, key=lambda n: n.reader, when=lambda n: not getattr(n, flag)),
                 "__module__": __name__}
    Notice: Any = type("Notice", (CounterMixin, Model), namespace)
    Reader.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Notice.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Reader(pk="u").save()
    for n in range(3):
        Notice(pk=f"n{n}", reader="u").save()
    assert flag in read_by((Notice.inbox,), (Notice.get("n0"),))
    result = Notice.get("n0").update(actions=[getattr(Notice, flag).set(True)])
    assert [change.delta for change in result.changes] == [-1]
    stored = Notice.get("n1")
    setattr(stored, flag, True)
    stored.save()
    assert Reader.get("u", consistent_read=True).unread == 1


class Desk(CounterMixin, Model):
    class Meta:
        table_name = "Desks"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    published = CounterField()
    live = CounterField()


class Article(CounterMixin, Model):
    """Counted through a property and through a method, both reading the article's own status."""

    class Meta:
        table_name = "Articles"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    desk = UnicodeAttribute()
    status = UnicodeAttribute(default="draft")
    retracted = BooleanAttribute(default=False)

    @property
    def is_published(self) -> bool:
        return self.status == "published"

    def is_live(self) -> bool:
        return self.is_published and not self.retracted

    on_desk = counted_by(Desk.published, key=lambda a: a.desk, when=lambda a: a.is_published)
    live_on_desk = counted_by(Desk.live, key=lambda a: a.desk, when=lambda a: a.is_live())


def test_a_when_that_reads_a_property_or_a_method_is_seen_as_reading_their_inputs() -> None:
    from pynamodb.connection import Connection
    from pynamodb.transactions import TransactWrite

    Desk.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Article.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Desk(pk="d").save()
    Article(pk="a", desk="d").save()
    Article(pk="b", desk="d").save()
    stored = Article.get("a")
    assert {"status"} <= read_by((Article.on_desk,), (stored,))
    assert {"status"} <= read_by((Article.live_on_desk,), (stored,))  # retracted is read only once published
    result = stored.update(actions=[Article.status.set("published")])
    assert sorted((c.attribute, c.delta) for c in result.changes) == [("live", 1), ("published", 1)]
    assert read_by((Article.live_on_desk,), (Article.get("a"),)) >= {"status", "retracted"}
    Article.get("a").update(actions=[Article.retracted.set(True)])
    before = snapshot()
    with pytest.raises(CountingBypassError):
        with TransactWrite(connection=Connection(region=REGION)) as transaction:
            transaction.update(Article.get("b"), actions=[Article.status.set("published")])
    assert snapshot() == before
    desk = Desk.get("d", consistent_read=True)
    assert (desk.published, desk.live) == (1, 0)


# -- the relations' functions run once per state -------------------------------------------------------------------
class Shelf(CounterMixin, Model):
    Meta = type("Meta", (), {"table_name": "Shelves", "region": REGION})
    pk = UnicodeAttribute(hash_key=True)
    shown = CounterField()


CALLS: List[str] = []
"""The calls of :class:`Book`'s key and ``when=`` functions, in order."""


def _shelf_of(book: Any) -> str:
    CALLS.append("key")
    return str(book.shelf)


def _on_show(book: Any) -> bool:
    CALLS.append("when")
    return bool(book.status == "shown")


class Book(CounterMixin, Model):
    """Counted on its shelf while shown; its functions count their calls."""

    Meta = type("Meta", (), {"table_name": "Books", "region": REGION})
    pk = UnicodeAttribute(hash_key=True)
    shelf = UnicodeAttribute()
    status = UnicodeAttribute()
    on_shelf = counted_by(Shelf.shown, key=_shelf_of, when=_on_show)


def _shown(shelf: str) -> int:
    return Shelf.get(shelf, consistent_read=True).shown


def test_an_edit_runs_the_key_and_when_functions_once_per_state_and_is_conditioned_on_what_they_read() -> None:
    Shelf.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Book.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    for shelf in ("s1", "s2"):
        Shelf(pk=shelf).save()
    Book(pk="b", shelf="s1", status="shown").save()
    stored = Book.get("b", consistent_read=True)
    stored.shelf = "s2"
    CALLS.clear()
    stored.save()  # a move: the stored state and the new one, each read once
    assert sorted(CALLS) == ["key", "key", "when", "when"]
    assert (_shown("s1"), _shown("s2")) == (0, 1)
    copy = Book.get("b", consistent_read=True)
    copy.shelf = "s1"  # edited in memory only: counted off the stored one, the one state read
    CALLS.clear()
    copy.delete()
    assert sorted(CALLS) == ["key", "when"]
    assert (_shown("s1"), _shown("s2")) == (0, 0)

    Book(pk="c", shelf="s1", status="shown").save()
    mine, theirs = Book.get("c", consistent_read=True), Book.get("c", consistent_read=True)
    theirs.status = "hidden"
    theirs.save()  # another writer hid it after mine was loaded: status, read by when=, decides its count
    mine.shelf = "s2"
    result = mine.save()  # counted from shown on s1: refused on its status, counted again from the stored one
    assert result.attempts == 2
    assert (_shown("s1"), _shown("s2")) == (0, 1)


# -- write ids: what recognises a write of one's own -----------------------------------------------------------------
def test_a_create_retried_with_its_token_after_an_edit_is_recognised_not_a_duplicate() -> None:
    from tests.support.factories import like, post, tally

    post()
    like().save(token="client-idempotency-key-1")  # committed; the client never saw the answer
    stored = like().__class__.get("POST#a91f", "LIKE#USER#7c20", consistent_read=True)
    stored.liked_at = 2
    stored.save()  # another request edits the like
    result = like().save(token="client-idempotency-key-1")  # the client retries, with its idempotency key
    assert result.recovered and tally() == 1
    with pytest.raises(DuplicateChildError):
        like().save(token="another-key")
    assert tally() == 1
