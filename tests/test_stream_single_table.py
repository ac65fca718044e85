"""``count_stream`` on one table holding several kinds of items ("Feed", :mod:`tests.support.feed_models`): posts,
likes, bookmarks, cheers, threads, messages, replies, rollups and items the library never wrote.

Which model an item is comes from what each model declares (its relations' prefixes, its non-null attributes
without defaults, its discriminator): a parent's own records are never a child's, two models given together that
nothing tells apart are refused before anything is written, and an item two of them fit stops the batch there,
naming both. A mark means "counted" only for the relation it is of, so two handlers on one table each count their
own; and a rollup found gone holds what the transactions would have left in it, whatever the batching."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from pynamodb_counters.exceptions import ConfigurationError
from pynamodb_counters.streams import SkipReason, StreamResult, count_stream
from pynamodb_counters.testing import lambda_event, stream_records
from tests.support.factories import raw_client
from tests.support.feed_models import FEED_MODELS, TABLE, Bookmark, Day, Like, Message, Post, PostDay, Thread
from tests.support.models import REGION

pytestmark = pytest.mark.usefixtures("dynamodb")


@pytest.fixture
def counters_models() -> List[type]:
    return list(FEED_MODELS)


def stream(after: Optional[str] = None) -> List[Dict[str, Any]]:
    return stream_records(Post, after=after)


def handler(records: List[Dict[str, Any]], *models: type) -> StreamResult:
    """A Lambda on the Feed table's stream, counting ``models``."""
    return count_stream(lambda_event(records, Post), models=list(models))


def last(records: List[Dict[str, Any]]) -> str:
    return str(records[-1]["dynamodb"]["SequenceNumber"])


def items() -> List[Dict[str, Any]]:
    return sorted(raw_client(None).scan(TableName=TABLE)["Items"], key=repr)


def post(pk: str = "POST#p1") -> Post:
    return Post.get(pk, "META", consistent_read=True)


def bucket(model: type, key: Any) -> Optional[int]:
    try:
        return int(model.get(*key, consistent_read=True).likes)
    except model.DoesNotExist:
        return None


def profile(user: str) -> None:
    """An item the library never wrote: a user's profile."""
    raw_client(None).put_item(TableName=TABLE, Item={"pk": {"S": f"USER#{user}"}, "sk": {"S": "PROFILE"},
                                                     "name": {"S": user}})


# -- which model an item is --------------------------------------------------------------------------------------
def test_a_stream_relation_whose_items_nothing_tells_from_its_parents_is_refused_when_declared() -> None:
    with pytest.raises((ConfigurationError, RuntimeError)) as refused:
        class Clap(CounterMixin, Model):
            Meta = Post.Meta
            pk = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)
            post = counted_by(Post.like_tally, key=lambda clap: (clap.pk, "META"), counting="stream")

    # Python before 3.12 wraps an error raised in __set_name__ in a RuntimeError; ours is its cause
    error = refused.value.__cause__ if isinstance(refused.value, RuntimeError) else refused.value
    assert isinstance(error, ConfigurationError)
    assert "Clap" in str(error) and "Post" in str(error) and "prefix=" in str(error)


def test_given_models_that_nothing_tells_apart_are_refused_at_the_first_call_naming_both() -> None:
    class Shelf(CounterMixin, Model):
        class Meta:
            table_name = "Shelves"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        items = CounterField()

    class Stray(CounterMixin, Model):  # in the Feed table, counted into a shelf in another table
        Meta = Post.Meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        expires_at = TTLAttribute(null=True)
        shelf = counted_by(Shelf.items, key=lambda stray: stray.sk, counting="stream")

    Post(pk="POST#p1", sk="META").save()
    Like(pk="POST#p1", sk="LIKE#ann", day="d1").save()
    before = items()
    for given in ([Like, Stray], [Stray]):
        with pytest.raises(ConfigurationError) as refused:
            handler(stream(), *given)
        message = str(refused.value)
        assert "Stray" in message and "prefix=" in message and "Nothing was written" in message
    assert items() == before


@pytest.mark.parametrize("order", [("likes", "messages"), ("messages", "likes")])
def test_likes_and_messages_are_each_counted_in_either_order_and_parents_records_are_no_ones(order: Any) -> None:
    """A like and a message share the table and nothing else: the like's sort key is under its relation's prefix,
    the message names its thread (``thread_id``, non-null). Neither fits the other model, and the post's and the
    thread's own records fit neither."""
    Post(pk="POST#p1", sk="META").save()
    Thread(pk="THREAD#t1", sk="META").save()
    profile("u1")
    raw_client(None).put_item(TableName=TABLE, Item={"pk": {"S": "POST#p1"}, "sk": {"S": "LIKE#ann"},
                                                     "day": {"S": "d1"}})  # another service's like
    Message(pk="MSG#m1", sk="MSG", thread_id="THREAD#t1").save()
    given = {"likes": Like, "messages": Message}
    result = handler(stream(), *(given[name] for name in order))
    assert result["batchItemFailures"] == [] and result.error is None
    assert post().like_tally == 1
    assert Thread.get("THREAD#t1", "META", consistent_read=True).messages == 1
    assert bucket(PostDay, ("POST#p1", "DAY#d1")) == 1 and bucket(Day, ("DAY#d1", "META")) == 1
    unknown = [skip for skip in result.skipped if skip.reason is SkipReason.UNKNOWN]
    assert len(unknown) >= 3  # the post's, the thread's and the profile's records


def test_an_item_two_given_models_fit_stops_the_batch_there_naming_both() -> None:
    Post(pk="POST#p1", sk="META").save()
    Thread(pk="THREAD#t1", sk="META").save()
    Like(pk="POST#p1", sk="LIKE#ann", day="d1").save()
    raw_client(None).put_item(TableName=TABLE, Item={"pk": {"S": "POST#p1"}, "sk": {"S": "LIKE#odd"},
                                                     "day": {"S": "d1"}, "thread_id": {"S": "THREAD#t1"}})
    odd = last(stream())
    Like(pk="POST#p1", sk="LIKE#bob", day="d1").save()
    result = handler(stream(), Like, Message)
    assert result["batchItemFailures"] == [{"itemIdentifier": odd}]
    assert isinstance(result.error, ConfigurationError)
    assert "Like" in str(result.error) and "Message" in str(result.error)
    assert post().like_tally == 1  # the like before it; nothing of it or after it
    assert Thread.get("THREAD#t1", "META", consistent_read=True).messages == 0


def test_a_parents_own_records_are_never_a_child_of_a_model_with_a_prefix_on_any_of_its_relations() -> None:
    """A like has relations with ``prefix=`` and one without (the site's day, in another partition): every like's
    sort key is under the prefix, so a post's records are not likes, and create no day."""
    Post(pk="POST#p1", sk="META", title="hello").save()
    result = handler(stream(), Like)
    assert result["batchItemFailures"] == [] and result.counted == ()
    assert {skip.reason for skip in result.skipped} == {SkipReason.UNKNOWN}
    assert post().like_tally == 0
    assert [item["pk"]["S"] for item in items()] == ["POST#p1"]


# -- a mark means counted for its own relation ---------------------------------------------------------------------
@pytest.mark.parametrize("first", [Like, Bookmark])
def test_two_handlers_on_one_table_each_count_their_own_models(first: type) -> None:
    Post(pk="POST#p1", sk="META").save()
    start = last(stream())
    Bookmark(pk="POST#p1", sk="BM#ann").save()
    Like(pk="POST#p1", sk="LIKE#bob", day="d1").save()
    Bookmark(pk="POST#p1", sk="BM#cid").save()
    Like(pk="POST#p1", sk="LIKE#dan", day="d1").save()
    records = stream(after=start)
    order = [first, Bookmark if first is Like else Like]
    for _ in range(2):  # each batch delivered twice to each function
        for model in order:
            assert handler(records, model)["batchItemFailures"] == []
            assert (post().like_tally, post().bookmark_tally) in {(2, 0), (0, 2), (2, 2)}
    assert (post().like_tally, post().bookmark_tally) == (2, 2)


# -- a rollup found gone ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("deleted, added", [(1, 1), (1, 3), (2, 1)])
def test_a_gone_rollup_counted_from_one_batch_holds_its_first_counts_whatever_came_before_them(
        deleted: int, added: int) -> None:
    """The post's day (in its partition) and the site's day (outside it, with markers) are deleted while the
    likes they counted stay; then old likes of that day are deleted and new ones saved, and the handler gets them
    all in one batch. In transactions, each delete leaves out its decrement (the rollup went with its counts) and
    the first new like creates the rollup again: it holds the new likes. So does one batch."""
    Post(pk="POST#p1", sk="META").save()
    for n in range(3):
        Like(pk="POST#p1", sk=f"LIKE#old{n}", day="d1").save()
    handler(stream(), Like)
    assert (bucket(PostDay, ("POST#p1", "DAY#d1")), bucket(Day, ("DAY#d1", "META"))) == (3, 3)
    client = raw_client(None)
    for key in (("POST#p1", "DAY#d1"), ("DAY#d1", "META")):  # gone, as a rollup past its TTL goes
        client.delete_item(TableName=TABLE, Key={"pk": {"S": key[0]}, "sk": {"S": key[1]}})
    start = last(stream())
    for n in range(deleted):
        Like.get("POST#p1", f"LIKE#old{n}").delete()
    for n in range(added):
        Like(pk="POST#p1", sk=f"LIKE#new{n}", day="d1").save()
    result = handler(stream(after=start), Like)
    assert result["batchItemFailures"] == []
    assert bucket(PostDay, ("POST#p1", "DAY#d1")) == added
    assert bucket(Day, ("DAY#d1", "META")) == added
    assert post().like_tally == 3 - deleted + added
    left_out: Dict[str, int] = {}
    for change in result.missing:  # what the deletes took off the gone rollups: left out
        left_out[change.parent.__name__] = left_out.get(change.parent.__name__, 0) + change.delta
    assert left_out == {"PostDay": -deleted, "Day": -deleted}


def test_count_expiries_tells_its_children_from_other_children_of_the_table_not_from_parents() -> None:
    """``count_expiries`` takes off only items a counted write stored (they hold its write id, a parent never does):
    a child with no prefix beside its parent is accepted, and refused beside another expiring child nothing tells
    it from."""
    from datetime import datetime, timezone

    from pynamodb_counters.streams import count_expiries
    from tests.support.stream_records import expire, ttl_marked

    meta = type("Meta", (), {"table_name": "Passes", "region": REGION, "stream_view_type": "NEW_AND_OLD_IMAGES"})

    class Event(CounterMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        passes = CounterField()

    class Pass(CounterMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        expires_at = TTLAttribute(null=True)
        event = counted_by(Event.passes, key=lambda p: (p.pk, "META"), expiries="stream")

    Event.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    try:
        Event(pk="EVENT#e0", sk="META").save()  # a parent: its deletion by TTL is no child's expiry
        Event(pk="EVENT#e1", sk="META").save()
        Pass(pk="EVENT#e1", sk="PASS#ann", expires_at=datetime(2026, 1, 1, tzinfo=timezone.utc)).save()
        assert Event.get("EVENT#e1", "META", consistent_read=True).passes == 1
        gone = expire("Passes", [{"pk": {"S": "EVENT#e1"}, "sk": {"S": "PASS#ann"}},
                                 {"pk": {"S": "EVENT#e0"}, "sk": {"S": "META"}}])
        records = ttl_marked(stream_records(Event), gone)
        result = count_expiries(lambda_event(records, Event), models=[Pass])
        assert result.error is None and len(result.counted) == 1
        removed = [record["eventID"] for record in records if record["eventName"] == "REMOVE"]
        assert {skip.event for skip in result.skipped} >= set(removed) - set(result.counted)  # the event's
        assert Event.get("EVENT#e1", "META", consistent_read=True).passes == 0

        class Ticket(CounterMixin, Model):
            Meta = meta
            pk = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)
            expires_at = TTLAttribute(null=True)
            event = counted_by(Event.passes, key=lambda t: (t.pk, "META"), expiries="stream")

        with pytest.raises(ConfigurationError, match=r"Pass and Ticket share table Passes"):
            count_expiries(lambda_event(records, Event), models=[Pass])
    finally:
        Event.delete_table()


def test_a_polymorphic_table_tells_its_classes_apart_by_their_discriminator_with_no_prefix() -> None:
    """One DiscriminatorAttribute on a common base: each class's items name it, so a like counted from the stream
    needs no prefix beside its post, and a comment (another class of the table) is no like."""
    from pynamodb.attributes import DiscriminatorAttribute

    meta = type("Meta", (), {"table_name": "Kinds", "region": REGION, "stream_view_type": "NEW_AND_OLD_IMAGES"})

    class Item(Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        kind = DiscriminatorAttribute()

    class Article(CounterMixin, Item, discriminator="article"):
        likes = CounterField()

    class Comment(Item, discriminator="comment"):
        pass

    class Heart(CounterMixin, Item, discriminator="heart"):
        article = counted_by(Article.likes, key=lambda heart: (heart.pk, "META"), counting="stream")

    Item.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    try:
        Article(pk="A#1", sk="META").save()
        Heart(pk="A#1", sk="ann").save()
        Comment(pk="A#1", sk="bob").save()
        Heart(pk="A#1", sk="cid").save()
        result = count_stream(lambda_event(stream_records(Item), Item), models=[Heart])
        assert result.error is None and len(result.counted) == 2
        assert Article.get("A#1", "META", consistent_read=True).likes == 2
    finally:
        Item.delete_table()
