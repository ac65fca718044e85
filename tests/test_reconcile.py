"""Audits find exactly the drifted counters; repairs fix exactly those, without losing live writes."""
from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from pynamodb.signals import pre_dynamodb_send

from pynamodb_counters import Drift, audit, repair, reshard, set_counter, signals, skip_counting
from pynamodb_counters.declare._expiry_rules import MARKER
from pynamodb_counters.exceptions import ConfigurationError, InvalidArgumentError
from pynamodb_counters.streams import count_expiries
from pynamodb_counters.testing import export_table, lambda_event, stream_records
from tests.support.audit_models import Answer, Badge, Cart, Crew, Line, Question, create_tables
from tests.support.client_hooks import unlike_before_the_first_query
from tests.support.factories import drifted_by_one, like, likes, post, raw_client, snapshot, stored, tally
from tests.support.models import Bookmark, Comment, Like, Post, User
from tests.support.stream_records import expire, ttl_marked

pytestmark = pytest.mark.usefixtures("dynamodb")

Key = Tuple[str, str]


def seed(posts: int = 200, seed_value: int = 7) -> Dict[Key, Tuple[Any, int]]:
    """``posts`` posts with 0 to 5 likes each and exact counters, then drift planted on a known subset: counters
    too high, too low, missing entirely, and non-zero on posts without likes. Returns {key: (stored, actual)} of
    the drifted posts, ``stored`` None where the attribute is missing."""
    rng = random.Random(seed_value)
    children = {(f"POST#{n:03d}", "META"): rng.randint(0, 5) for n in range(posts)}
    with skip_counting():
        with Post.batch_write() as batch:
            for (pk, sk), n in children.items():
                batch.save(Post(pk=pk, sk=sk, like_tally=n))
        with Like.batch_write() as batch:
            for (pk, _), n in children.items():
                for u in range(n):
                    batch.save(Like(pk=pk, sk=f"LIKE#USER#{u}", liked_at=1))
    planted: Dict[Key, Tuple[Any, int]] = {}
    keys = sorted(children)
    for key in rng.sample(keys, min(30, posts // 2)):
        actual = children[key]
        if len(planted) % 3 == 0:
            stored: Any = None  # a counter added to an existing model: the attribute is missing
            raw_client(None).update_item(TableName="Social", Key={"pk": {"S": key[0]}, "sk": {"S": key[1]}},
                                         UpdateExpression="REMOVE like_tally")
        else:
            stored = actual + rng.choice([-2, -1, 1, 3]) if actual >= 2 else actual + rng.choice([1, 4])
            with skip_counting():
                Post(pk=key[0], sk=key[1], like_tally=stored).save()
        planted[key] = (stored, actual)
    return planted


@pytest.mark.slow
@pytest.mark.parametrize("segments", [1, 4])
def test_a_scan_audit_reports_exactly_the_planted_drift(segments: int) -> None:
    planted = seed()
    report = audit(Post.like_tally, segments=segments)
    assert report.parents_checked == 200
    assert {d.key: (d.stored, d.actual) for d in report.drifts} == planted
    assert any(actual == 0 for _, actual in planted.values())  # parents with zero children are in it
    assert any(stored is None for stored, _ in planted.values())
    assert report.read_units > 0 and report.drift_count == 30


def test_an_audit_of_explicit_parents_or_a_relation() -> None:
    planted = seed(40)
    wanted = sorted(planted)[:3] + [("POST#000", "META")]
    report = audit(Like.post, parents=wanted, workers=2)
    assert report.parents_checked == 4
    assert {d.key for d in report.drifts} == set(wanted) & set(planted)


def test_an_audit_bounded_by_prefix_and_limit() -> None:
    planted = seed(60)
    report = audit(Post.like_tally, key_prefix="POST#01")
    assert report.parents_checked == 10
    assert {d.key for d in report.drifts} == {k for k in planted if k[0].startswith("POST#01")}
    assert audit(Post.like_tally, limit=7, segments=3).parents_checked == 7


def test_the_scan_visits_only_parents() -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    Comment(pk="POST#a91f", sk="COMMENT#1", text="hi").save()
    report = audit(Post.like_tally)
    assert report.parents_checked == 1 and report.drifts == ()


def test_repair_fixes_exactly_the_drift_and_a_second_audit_is_clean() -> None:
    planted = seed(50)
    report = audit(Post.like_tally)
    repaired: List[Dict[str, Any]] = []
    with signals.counter_repaired.connected_to(lambda sender, **kw: repaired.append(kw), sender=Post):
        result = repair(report.drifts)
    assert result.complete and [r.status for r in result.repairs] == ["repaired"] * len(planted)
    assert {r["key"]: (r["before"], r["after"]) for r in repaired} == planted
    assert audit(Post.like_tally).drifts == ()
    for key, (_, actual) in planted.items():
        assert Post.get(*key).like_tally == actual


def test_a_dry_run_writes_nothing() -> None:
    seed(20)
    report = audit(Post.like_tally)
    before = snapshot()
    result = repair(report.drifts, dry_run=True)
    assert {r.status for r in result.repairs} == {"planned"}
    assert snapshot() == before


def test_a_like_landing_after_the_audit_is_neither_lost_nor_double_counted() -> None:
    post()
    with skip_counting():
        Like(pk="POST#a91f", sk="LIKE#USER#old", liked_at=1).save()  # drift: 1 child, counter 0
    [drift] = audit(Post.like_tally).drifts
    Like(pk="POST#a91f", sk="LIKE#USER#new", liked_at=1).save()  # counted: 2 children, counter 1
    [result] = repair([drift]).repairs
    assert result.status == "repaired" and result.attempts == 1  # its read saw the sequence move: recounted first
    assert Post.get("POST#a91f", "META").like_tally == 2


def test_a_like_and_unlike_between_audit_and_repair_force_a_recount() -> None:
    post()
    with skip_counting():
        Like(pk="POST#a91f", sk="LIKE#USER#old", liked_at=1).save()
    [drift] = audit(Post.like_tally).drifts
    Like(pk="POST#a91f", sk="LIKE#USER#x", liked_at=1).save()
    Like(pk="POST#a91f", sk="LIKE#USER#x", liked_at=1).delete()  # the counter is back where the audit saw it
    [result] = repair([drift]).repairs
    assert result.attempts == 1 and Post.get("POST#a91f", "META").like_tally == 1  # recounted before writing


def test_a_drift_fixed_meanwhile_is_left_alone() -> None:
    post()
    with skip_counting():
        Like(pk="POST#a91f", sk="LIKE#USER#old", liked_at=1).save()
    [drift] = audit(Post.like_tally).drifts
    set_counter(Post.like_tally, ("POST#a91f", "META"), 1)
    [result] = repair([drift]).repairs
    assert result.status == "exact" and Post.get("POST#a91f", "META").like_tally == 1


def test_a_parent_deleted_before_the_repair() -> None:
    post()
    drift = Drift(Post, ("POST#a91f", "META"), "like_tally", 0, 3, None)
    Post.get("POST#a91f", "META").delete()
    [result] = repair([drift]).repairs
    assert result.status == "failed" and "no longer exists" in result.reason
    assert not result.status == "repaired"


def test_a_parent_without_its_counter_reads_0_and_audits_as_drift() -> None:
    key = post("POST#old")
    raw_client(None).update_item(TableName="Social", Key={"pk": {"S": key[0]}, "sk": {"S": key[1]}},
                                 UpdateExpression="REMOVE like_tally")
    assert Post.get(*key).like_tally == 0
    assert [(d.stored, d.actual) for d in audit(Post.like_tally, parents=[key]).drifts] == [(None, 0)]


def test_children_counted_by_a_callable_and_in_another_table() -> None:
    post()
    User(user_id="U1").save()
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U1", user_id="U1").save()
    with skip_counting():
        Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U2", user_id="U1").save()
    report = audit(User.bookmarks)
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(("U1",), 1, 2)]
    assert report.read_units_estimated  # the callable's reads are the cost model's guess
    assert audit(Post.bookmark_count).drifts[0].actual == 2


def test_a_relation_that_cannot_be_counted_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="declare counted_by"):
        audit(Comment.reply_count)
    with pytest.raises(InvalidArgumentError, match="CounterField"):  # a bad argument, not a bad declaration
        audit(Post.title)  # type: ignore[arg-type]


def test_a_scan_of_a_shared_table_needs_a_way_to_tell_parents() -> None:
    from pynamodb.attributes import UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin, counted_by

    class Thread(CounterMixin, Model):
        class Meta:
            table_name = "Social"
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        reply_tally = CounterField()

    class Answer(CounterMixin, Model):
        class Meta:
            table_name = "Social"
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        thread = counted_by(Thread.reply_tally, key=lambda a: (a.pk, "META"), prefix="ANSWER#")

    before = snapshot()
    with pytest.raises(ConfigurationError, match="shares table Social with .*Define Thread.audit_filter"):
        audit(Thread.reply_tally)
    assert audit(Thread.reply_tally, parents=[]).parents_checked == 0  # explicit parents need no filter
    assert snapshot() == before


def test_children_beside_their_parents_are_never_scanned_as_parents() -> None:
    from pynamodb.attributes import UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin, counted_by

    class Topic(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        answer_tally = CounterField()

        @classmethod
        def audit_filter(cls) -> Any:
            return None  # every item of the table is a topic... except the answers beside them

    class TopicAnswer(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        topic = counted_by(Topic.answer_tally, key=lambda a: (a.pk, "TOPIC"), prefix="ANSWER#")

    Topic(pk="T1", sk="TOPIC").save()
    TopicAnswer(pk="T1", sk="ANSWER#1").save()
    TopicAnswer(pk="T1", sk="ANSWER#2").save()
    report = audit(Topic.answer_tally)
    assert report.parents_checked == 1 and report.drifts == ()  # the two answers were not taken for topics


def polymorphic_activity() -> Tuple[Any, Any, Any, Any, Any]:
    """A single-table polymorphic model in the Boards table: walls, and activities under one prefix ``ACT#`` of
    which only cheers (and loud cheers, a subclass) are counted; jeers share the prefix uncounted."""
    from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin, counted_by

    class Item(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        cls = DiscriminatorAttribute(attr_name="itemKind")

    class Wall(Item, discriminator="wall"):
        cheers = CounterField()
        named = CounterField()

    class Activity(Item, discriminator="activity"):
        user = UnicodeAttribute(null=True)

    class Cheer(Activity, discriminator="cheer"):
        wall = counted_by(Wall.cheers, key=lambda c: (c.pk, "META"), prefix="ACT#")
        named_wall = counted_by(Wall.named, key=lambda c: (c.pk, "META"), prefix="ACT#",
                                when=lambda c: c.user is not None)  # conditional: the audit reads the items

    class LoudCheer(Cheer, discriminator="loud"):
        pass

    class Jeer(Activity, discriminator="jeer"):
        pass

    return Wall, Activity, Cheer, LoudCheer, Jeer


def test_an_audit_counts_only_the_classes_its_relation_counts_under_a_shared_prefix() -> None:
    Wall, _, Cheer, LoudCheer, Jeer = polymorphic_activity()
    Wall(pk="W1", sk="META").save()
    Cheer(pk="W1", sk="ACT#cheer#1", user="u1").save()
    LoudCheer(pk="W1", sk="ACT#loud#2", user="u2").save()  # a subclass: counted by the relation it inherits
    Jeer(pk="W1", sk="ACT#jeer#3", user="u3").save()
    Jeer(pk="W1", sk="ACT#jeer#4", user="u4").save()
    assert (Wall.get("W1", "META").cheers, Wall.get("W1", "META").named) == (2, 2)
    for counter in (Wall.cheers, Wall.named):
        assert audit(counter, parents=[("W1", "META")]).drifts == ()
        assert audit(counter).drifts == ()  # a Scan too
    with skip_counting():
        Cheer(pk="W1", sk="ACT#cheer#5", user="u5").save()  # drift: 3 cheers, counters 2
    for counter in (Wall.cheers, Wall.named):
        [drift] = audit(counter, parents=[("W1", "META")]).drifts
        assert (drift.stored, drift.actual) == (2, 3)
        assert [(r.status, r.after) for r in repair([drift]).repairs] == [("repaired", 3)]
    assert (Wall.get("W1", "META").cheers, Wall.get("W1", "META").named) == (3, 3)


def test_an_audit_of_a_relation_declared_on_the_root_of_a_polymorphic_model_counts_every_class() -> None:
    from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin, counted_by

    class Board2(CounterMixin, Model):
        class Meta:
            table_name = "Pinboards"  # a table of its own: the suite's Scans of Users stay unshared
            region = "us-east-1"
        user_id = UnicodeAttribute(hash_key=True)
        pins = CounterField()

    class Pin(CounterMixin, Model):
        class Meta:
            table_name = "KindedPins"  # a table of its own: the stream suites' Boards table holds other pins
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        pin_kind = DiscriminatorAttribute()
        board = counted_by(Board2.pins, key=lambda p: p.pk, prefix="PIN#")

    class PhotoPin(Pin, discriminator="photo"):
        pass

    class VideoPin(Pin, discriminator="video"):
        pass

    Board2.create_table(billing_mode="PAY_PER_REQUEST")
    Pin.create_table(billing_mode="PAY_PER_REQUEST")
    Board2(user_id="B1").save()
    PhotoPin(pk="B1", sk="PIN#1").save()
    VideoPin(pk="B1", sk="PIN#2").save()
    assert Board2.get("B1").pins == 2 and audit(Board2.pins, parents=["B1"]).drifts == ()


def test_a_parent_past_its_ttl_that_is_not_a_rollup_is_audited_and_repaired_like_any_other() -> None:
    from datetime import datetime, timedelta, timezone

    from pynamodb.attributes import TTLAttribute, UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin, counted_by

    class Session(CounterMixin, Model):
        class Meta:
            table_name = "Sessions"
            region = "us-east-1"
        user_id = UnicodeAttribute(hash_key=True)
        events = CounterField()
        expires = TTLAttribute(null=True)

        @classmethod
        def audit_filter(cls) -> Any:
            return cls.user_id.startswith("SESSION#")

    class Event(CounterMixin, Model):
        class Meta:
            table_name = "Boards"
            region = "us-east-1"
        pk = UnicodeAttribute(hash_key=True)  # the session's key
        sk = UnicodeAttribute(range_key=True)  # "EVENT#1"
        session = counted_by(Session.events, key=lambda e: e.pk, prefix="EVENT#")

    Session.create_table(billing_mode="PAY_PER_REQUEST")
    Session(user_id="SESSION#1", expires=datetime.now(timezone.utc) - timedelta(minutes=1)).save()  # not deleted yet
    Event(pk="SESSION#1", sk="EVENT#1").save()  # counted writes still land on it
    with skip_counting():
        Event(pk="SESSION#1", sk="EVENT#2").save()  # drift: 2 events, counter 1
    for report in (audit(Session.events), audit(Session.events, parents=["SESSION#1"])):
        assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(("SESSION#1",), 1, 2)]
        assert report.missing == () and report.parents_checked == 1
    assert [r.status for r in repair(audit(Session.events).drifts).repairs] == ["repaired"]
    assert Session.get("SESSION#1").events == 2


# -- an exact answer needs the same proof as a drift: the parent seen unchanged around the count -----------------
def test_an_audit_never_calls_a_parent_exact_when_a_write_lands_between_its_read_and_its_count() -> None:
    key = drifted_by_one()
    with unlike_before_the_first_query(key[0]) as unliked:
        report = audit(Post.like_tally, parents=[key])
    assert unliked  # the unlike landed: stored 1, children 2, and the count met the counter read before it (2)
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(key, 1, 2)]


def test_a_repair_never_answers_exact_when_a_write_lands_between_its_read_and_its_count() -> None:
    key = drifted_by_one()
    [drift] = audit(Post.like_tally, parents=[key]).drifts
    like("later", key[0]).save()  # the parent moves (stored 3, children 4): the repair recounts
    like("later2", key[0]).save()
    with unlike_before_the_first_query(key[0]) as unliked:
        [result] = repair([drift]).repairs
    assert unliked and result.status == "repaired"
    assert tally() == likes() == 4


def test_a_parent_that_changes_during_every_count_is_unverifiable_neither_exact_nor_drift() -> None:
    key = drifted_by_one()
    liked: List[int] = []

    def like_before_every_query(sender: Any, operation_name: str, **_: Any) -> None:
        if operation_name == "Query":
            liked.append(1)
            like(f"busy{len(liked)}", key[0]).save()

    pre_dynamodb_send.connect(like_before_every_query, weak=False)
    try:
        report = audit(Post.like_tally, parents=[key])
        [drift] = [Drift(Post, key, "like_tally", tally(), likes() + 1, None)]
        [result] = repair([drift], max_attempts=2).repairs
    finally:
        pre_dynamodb_send.disconnect(like_before_every_query)
    assert not report.drifts and [u.key for u in report.unverifiable] == [key] and len(liked) >= 3
    assert "changed during every count" in report.unverifiable[0].reason
    assert result.status == "failed" and "kept changing" in result.reason
    assert tally() == likes() - 1  # nothing written: still one short


# -- children an audit cannot count: the parent is unverifiable, the other parents audited ----------------------
def test_a_child_whose_amount_was_stored_as_a_string_makes_its_parent_unverifiable_naming_it() -> None:
    create_tables()
    for pk in ("CART#a", "CART#b"):
        Cart(pk=pk, sk="META").save()
        Line(pk=pk, sk="LINE#1", units=2).save()
    raw_client(None).put_item(TableName="Carts", Item={"pk": {"S": "CART#a"}, "sk": {"S": "LINE#2"},
                                                       "units": {"S": "three"}})  # around the library
    set_counter(Cart.quantity, ("CART#b", "META"), 5)  # drifted: 5, its line adds 2
    before = snapshot()
    report = audit(Cart.quantity)
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(("CART#b", "META"), 5, 2)]
    [refused] = report.unverifiable
    assert refused.key == ("CART#a", "META") and "LINE#2" in refused.reason and "Line" in refused.reason
    [result] = repair([Drift(Cart, ("CART#a", "META"), "quantity", 2, 5, None)]).repairs
    assert result.status == "refused" and "LINE#2" in result.reason
    assert snapshot() == before  # nothing written


def test_a_prefix_relation_sending_one_partitions_children_to_several_parents_is_unverifiable() -> None:
    create_tables()
    for n in (1, 2):
        Question(pk="FORUM#1", sk=f"QUESTION#{n}").save()
    Answer(pk="FORUM#1", sk="ANSWER#1#a").save()
    Answer(pk="FORUM#1", sk="ANSWER#2#b").save()
    Question(pk="FORUM#2", sk="QUESTION#1").save()
    with skip_counting():
        Answer(pk="FORUM#2", sk="ANSWER#1#x").save()  # one partition, one parent: audited as usual
    before = snapshot()
    report = audit(Question.answers)
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(("FORUM#2", "QUESTION#1"), 0, 1)]
    assert sorted(u.key for u in report.unverifiable) == [("FORUM#1", "QUESTION#1"), ("FORUM#1", "QUESTION#2")]
    assert all("children=" in u.reason for u in report.unverifiable)
    [alone] = audit(Question.answers, parents=[("FORUM#1", "QUESTION#2")]).unverifiable  # its sibling unseen
    assert "ANSWER#1#a" in alone.reason and "children=" in alone.reason
    [result] = repair([Drift(Question, ("FORUM#1", "QUESTION#1"), "answers", 1, 2, None)]).repairs
    assert result.status == "refused" and Question.get("FORUM#1", "QUESTION#1").answers == 1
    assert snapshot() == before


# -- expiry markers are the library's own items: never parents ---------------------------------------------------
def test_audits_repairs_and_reshard_leave_expiry_markers_out(tmp_path: Path) -> None:
    create_tables()
    Crew(pk="CREW#1", sk="META").save()
    for name in ("ann", "bob", "cy"):
        Badge(pk="CREW#1", sk=f"BADGE#{name}", expires=datetime(2026, 1, 1, tzinfo=timezone.utc)).save()
    expired = expire("Crews", [{"pk": {"S": "CREW#1"}, "sk": {"S": f"BADGE#{name}"}} for name in ("ann", "bob")])
    assert count_expiries(lambda_event(ttl_marked(stream_records(Badge), expired), Badge), models=[Badge]).counted
    markers = [item for item in stored("Crews") if MARKER in item]
    assert len(markers) == 2 and Crew.get("CREW#1", "META").badges == 1
    live = audit(Crew.badges)
    exported = audit(Crew.badges, export=export_table(Crew, tmp_path))
    assert live.parents_checked == exported.parents_checked == 1
    assert not live.drifts and not exported.candidates and not exported.drifts
    assert reshard(Crew.badges, 2) == 1 and Crew.badges.total(Crew.get("CREW#1", "META")) == 1
    marker = tuple(markers[0][name]["S"] for name in ("pk", "sk"))
    assert audit(Crew.badges, parents=[marker]).missing == (marker,)  # named by hand: not a parent either
    [result] = repair([Drift(Crew, marker, "badges", None, 0, None)]).repairs
    assert result.status == "failed"
    assert [item for item in stored("Crews") if MARKER in item] == markers  # never written onto
