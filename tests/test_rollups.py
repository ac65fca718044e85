"""Rollups: parents created by their first count (a show's claps per day), with no existence guard on an
increment; a decrement never creates one, and a delete whose rollup expired still deletes the child."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

import pytest
from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
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
    repair,
)
from pynamodb_counters.exceptions import ChildValueError, ConfigurationError, ParentNotFoundError
from tests.support.client_hooks import BeforeTransactions
from tests.support.factories import snapshot, swapped
from tests.support.models import REGION, Clap, DailyClaps, Show

pytestmark = pytest.mark.usefixtures("dynamodb")

NOV_30 = 1795996800  # 2026-11-30T00:00:00Z


def show(name: str = "s1") -> None:
    Show(pk=f"SHOW#{name}", sk="META").save()


def clap(user: str, day: str = "2026-11-30", at: int = NOV_30, name: str = "s1") -> Clap:
    return Clap(pk=f"SHOW#{name}", sk=f"CLAP#USER#{user}", day=day, clapped_at=at)


def daily(day: str = "2026-11-30", name: str = "s1") -> Optional[DailyClaps]:
    try:
        return DailyClaps.get(f"SHOW#{name}", f"DAY#{day}", consistent_read=True)
    except DailyClaps.DoesNotExist:
        return None


def test_the_first_clap_of_a_day_creates_its_rollup_with_its_defaults() -> None:
    show()
    assert daily() is None
    result = clap("a").save()
    bucket = daily()
    assert bucket is not None and bucket.claps == 1 and bucket.label == "SHOW#s1 on 2026-11-30"
    assert bucket.expires == datetime.fromtimestamp(NOV_30 + 90 * 86400, timezone.utc)
    assert CounterChange(DailyClaps, ("SHOW#s1", "DAY#2026-11-30"), "claps", 1, 0) in result.changes
    clap("b", at=NOV_30 + 3600).save()  # the second clap adds; the defaults are set only where absent
    bucket = daily()
    assert bucket is not None and bucket.claps == 2
    assert bucket.expires == datetime.fromtimestamp(NOV_30 + 90 * 86400, timezone.utc)
    assert Show.get("SHOW#s1", "META").clap_total == 2


def test_a_week_of_rollups_is_one_query() -> None:
    show()
    for n, day in enumerate(["2026-11-24", "2026-11-26", "2026-11-26", "2026-11-30", "2026-12-01"]):
        clap(str(n), day=day).save()
    week = DailyClaps.query("SHOW#s1", DailyClaps.sk.between("DAY#2026-11-24", "DAY#2026-11-30"),
                            consistent_read=True)
    assert [(bucket.sk, bucket.claps) for bucket in week] == [("DAY#2026-11-24", 1), ("DAY#2026-11-26", 2),
                                                              ("DAY#2026-11-30", 1)]


def test_a_decrement_never_creates_a_rollup_and_a_delete_whose_rollup_expired_still_deletes_the_child() -> None:
    show()
    clap("a").save()
    clap("b").save()
    clap("a").delete()
    bucket = daily()
    assert bucket is not None and bucket.claps == 1
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key="DAY#2026-11-30")  # expired: TTL deleted it
    result = Clap.get("SHOW#s1", "CLAP#USER#b").delete()
    assert daily() is None  # not created again by the decrement
    assert result.rollups_gone == (CounterChange(DailyClaps, ("SHOW#s1", "DAY#2026-11-30"), "claps", -1, 0),)
    assert result.changes == (CounterChange(Show, ("SHOW#s1", "META"), "clap_total", -1, 0),)
    assert Show.get("SHOW#s1", "META").clap_total == 0
    assert list(Clap.query("SHOW#s1", Clap.sk.startswith("CLAP#"), consistent_read=True)) == []


def test_a_parent_that_must_exist_still_refuses_its_children() -> None:
    before = snapshot()
    with pytest.raises(ParentNotFoundError, match="SHOW#nowhere"):
        clap("a", name="nowhere").save()  # the show is not a rollup: no rollup is created either
    assert snapshot() == before


def test_bulk_creates_rollups_and_counts_each_once() -> None:
    show()
    result = bulk_save([clap(str(n), day=f"2026-11-{20 + n % 5}") for n in range(23)])
    assert len(result.added) == 23
    buckets = {bucket.sk: bucket.claps for bucket in DailyClaps.query("SHOW#s1", DailyClaps.sk.startswith("DAY#"),
                                                                      consistent_read=True)}
    assert buckets == {f"DAY#2026-11-{20 + n}": 5 if n < 3 else 4 for n in range(5)}
    assert sum(buckets.values()) == Show.get("SHOW#s1", "META").clap_total == 23


def test_audits_of_rollups_skip_buckets_past_their_ttl_and_repair_the_live_ones() -> None:
    show()
    clap("a", day="2026-11-30").save()
    clap("b", day="2026-12-01").save()
    DailyClaps._get_connection().update_item("SHOW#s1", range_key="DAY#2026-11-30", actions=[
        DailyClaps.claps.set(5), DailyClaps.expires.set(datetime(2026, 1, 1, tzinfo=timezone.utc))])  # expired
    DailyClaps._get_connection().update_item("SHOW#s1", range_key="DAY#2026-12-01",
                                             actions=[DailyClaps.claps.set(7)])  # drifted, live
    report = audit(DailyClaps.claps)
    assert [(drift.key, drift.stored, drift.actual) for drift in report.drifts] == [
        (("SHOW#s1", "DAY#2026-12-01"), 7, 1)]
    assert [r.status for r in repair(report.drifts).repairs] == ["repaired"]
    assert audit(DailyClaps.claps).drifts == ()


# -- declarations and bad input ------------------------------------------------------------------------------
def test_rollup_declarations_that_cannot_work() -> None:
    with pytest.raises(ConfigurationError, match="create_parent=True"):
        counted_by(Show.clap_total, key=lambda c: (c.pk, "META"), parent_defaults=lambda c: {})
    with pytest.raises(ConfigurationError, match="True or False"):
        counted_by(Show.clap_total, key=lambda c: (c.pk, "META"), create_parent="yes")  # type: ignore[arg-type]

    class Hot(CounterMixin, Model):
        class Meta:
            table_name = "Rollups"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        views = CounterField(shards=4)

    with pytest.raises(ConfigurationError, match="sharded"):
        counted_by(Hot.views, key=lambda c: (c.pk, "META"), create_parent=True)


@pytest.mark.parametrize("defaults, complaint", [
    (lambda c: ["expires"], "must return a dict"),
    (lambda c: {"claps": 3}, "not its counters"),
    (lambda c: {"nope": 1}, "must return a dict"),
    (lambda c: 1 / 0, "ZeroDivisionError"),
    (lambda c: {"expires": "tomorrow"}, "expires"),  # values the parent's attributes cannot hold
    (lambda c: {"expires": datetime(2030, 1, 1)}, "expires"),  # naive: a TTL needs a timezone
    (lambda c: {"label": 5}, "label"),
    (lambda c: {"pk": "OTHER"}, "key"),
    (lambda c: {"sk": "DAY#x"}, "key"),
], ids=["not a dict", "a counter", "not an attribute", "failing", "a TTL as text", "a naive datetime TTL",
        "a number for a string", "the hash key", "the range key"])
def test_parent_defaults_that_fail_or_name_other_things_write_nothing(defaults: Any, complaint: str) -> None:
    show()
    before = snapshot()
    with swapped(Clap.daily, "_parent_defaults", defaults):
        with pytest.raises(ChildValueError, match=complaint):
            clap("a").save()
    assert snapshot() == before
    assert NumberAttribute  # noqa: B018  (imported for the models above)


def test_a_delete_of_a_missing_clap_whose_rollup_is_absent_is_a_missing_child_even_if_it_is_clapped_meanwhile(
        transactions: BeforeTransactions) -> None:
    """The race CI found: an unclap racing the first clap of a day. The unclap's first attempt finds neither
    the clap nor its rollup; the clap is then saved (creating the rollup with 1). The unclap is refused as a
    missing child (it came first); it must not be sent again without the rollup's decrement, which would delete
    the clap and leave the rollup counting it."""
    from pynamodb_counters.exceptions import MissingChildError

    show()
    calls = transactions.watch({2: lambda: clap("a").save()})
    with pytest.raises(MissingChildError):
        clap("a").delete()
    assert len(calls) == 1  # refused at once, not sent again without the decrement
    transactions.watch({})
    clap("a").save()  # the clap that would have been saved meanwhile
    bucket = daily()
    stored = list(Clap.query("SHOW#s1", Clap.sk.startswith("CLAP#"), consistent_read=True))
    assert [c.sk for c in stored] == ["CLAP#USER#a"]
    assert bucket is not None and bucket.claps == 1 and Show.get("SHOW#s1", "META").clap_total == 1


def test_a_delete_sent_again_without_a_gone_rollups_decrement_decrements_it_if_the_rollup_returned_meanwhile(
        transactions: BeforeTransactions) -> None:
    """A rollup found gone, then created again (by a delete and a new save of the same clap) before the delete
    is sent again without its decrement: the resend checks that the rollup is still absent; it is not, so the
    delete counts off it after all. Every count follows the stored state at commit."""
    show()
    clap("a").save()
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key="DAY#2026-11-30")  # expired: TTL deleted it

    def again() -> None:
        Clap.get("SHOW#s1", "CLAP#USER#a").delete()  # its rollup is gone: deleted without that decrement
        clap("a").save()  # the day's first clap again: the rollup is created with 1

    mine = clap("a")
    calls = transactions.watch({2: again})
    result = mine.delete()
    assert len(calls) >= 3 and result.attempts == len(calls)
    assert result.rollups_gone == ()
    assert CounterChange(DailyClaps, ("SHOW#s1", "DAY#2026-11-30"), "claps", -1, 0) in result.changes
    bucket = daily()
    assert bucket is not None and bucket.claps == 0
    assert list(Clap.query("SHOW#s1", Clap.sk.startswith("CLAP#"), consistent_read=True)) == []
    assert Show.get("SHOW#s1", "META").clap_total == 0


def test_bulk_deletes_a_child_whose_rollup_is_gone_and_refuses_one_that_is_missing() -> None:
    from pynamodb_counters import bulk_delete
    from pynamodb_counters.exceptions import MissingChildError

    show()
    clap("a").save()
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key="DAY#2026-11-30")  # expired: TTL deleted it
    result = bulk_delete([clap("ghost", day="2026-11-29"), clap("a")])  # no clap, no rollup that day
    statuses = [(outcome.status, type(outcome.error).__name__) for outcome in result.outcomes]
    assert statuses == [("rejected", MissingChildError.__name__), ("removed", "NoneType")]
    gone = [change for r in result.results for change in r.rollups_gone]
    assert gone == [CounterChange(DailyClaps, ("SHOW#s1", "DAY#2026-11-30"), "claps", -1, 0)]
    assert daily() is None and daily("2026-11-29") is None
    assert Show.get("SHOW#s1", "META").clap_total == 0
    assert list(Clap.query("SHOW#s1", Clap.sk.startswith("CLAP#"), consistent_read=True)) == []


def test_a_rollup_in_a_single_table_never_counts_into_an_item_of_another_class() -> None:
    """A first count creates its rollup; it must not ADD its counter to an item of another class stored under the
    same key (a single-table design whose keys collide): refused as a foreign parent, nothing written."""
    from pynamodb.attributes import DiscriminatorAttribute

    class Stored(CounterMixin, Model):
        class Meta:
            table_name = "Polyrollups"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        kind = DiscriminatorAttribute()

    class Profile(Stored, discriminator="Profile"):
        name = UnicodeAttribute(null=True)

    class DailyVisits(Stored, discriminator="DailyVisits"):
        visits = CounterField()

    class Visit(CounterMixin, Model):
        class Meta:
            table_name = "Polyrollups"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        day = UnicodeAttribute()
        daily = counted_by(DailyVisits.visits, key=lambda v: (v.pk, f"DAY#{v.day}"), create_parent=True)

    Stored.create_table(read_capacity_units=1, write_capacity_units=1, wait=True)
    Visit(pk="U#1", sk="VISIT#a", day="1").save()  # creates its rollup, with its discriminator
    assert [(d.kind, d.visits) for d in DailyVisits.query("U#1", DailyVisits.sk == "DAY#1")] == \
        [(DailyVisits, 1)]
    Profile(pk="U#1", sk="DAY#2", name="not a rollup").save()  # another class's item, under a rollup's key
    before = sorted(str(item.serialize()) for item in Stored.scan(consistent_read=True))
    with pytest.raises(ParentNotFoundError, match="Profile"):
        Visit(pk="U#1", sk="VISIT#b", day="2").save()
    assert sorted(str(item.serialize()) for item in Stored.scan(consistent_read=True)) == before
    assert Visit.count("U#1", Visit.sk.startswith("VISIT#b")) == 0


# -- rollups where features cross: bulk, transactions, sums, gone buckets ------------------------------------------
def _expire(day: str = "2026-11-30") -> None:
    """The bucket's TTL passed and DynamoDB deleted it."""
    DailyClaps._get_connection().delete_item("SHOW#s1", range_key=f"DAY#{day}")


def _claps_stored() -> list:
    return sorted(c.sk for c in Clap.query("SHOW#s1", Clap.sk.startswith("CLAP#"), consistent_read=True))


def _bulk(saves: list, deletes: list) -> Any:
    result = bulk_write(saves=saves, deletes=deletes)
    assert [o.status for o in result.outcomes] == ["added"] * len(saves) + ["removed"] * len(deletes)
    return [change for r in result.results for change in r.rollups_gone]


def _transaction(saves: list, deletes: list) -> Any:
    with CountedTransaction() as transaction:
        for child in saves:
            transaction.save(child)
        for child in deletes:
            transaction.delete(child)
    assert transaction.result is not None
    return list(transaction.result.rollups_gone)


@pytest.mark.parametrize("write", [_bulk, _transaction], ids=["bulk_write", "CountedTransaction"])
@pytest.mark.parametrize("removed", [1, 2], ids=["one like out, net zero", "two likes out, net -1"])
def test_a_gone_rollup_takes_a_new_child_and_lets_old_ones_go_in_one_write(write: Any, removed: int) -> None:
    show()
    old = [clap(f"old{n}") for n in range(removed)]
    for each in old:
        each.save()
    _expire()
    gone = write([clap("new")], [Clap.get("SHOW#s1", f"CLAP#USER#old{n}") for n in range(removed)])
    assert gone == [CounterChange(DailyClaps, ("SHOW#s1", "DAY#2026-11-30"), "claps", -1, 0)] * removed
    bucket = daily()
    assert bucket is not None and bucket.claps == 1  # the new clap's, created by its first count
    assert bucket.expires is not None and bucket.label == "SHOW#s1 on 2026-11-30"
    assert _claps_stored() == ["CLAP#USER#new"] and Show.get("SHOW#s1", "META").clap_total == 1
    assert audit(DailyClaps.claps, parents=[("SHOW#s1", "DAY#2026-11-30")]).drifts == ()


class Day(CounterMixin, Model):
    """A sum rollup: a day's revenue, created by its first order."""

    class Meta:
        table_name = "Revenue"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "2026-11-30"
    revenue = CounterField()
    expires = TTLAttribute(null=True)
    region_code = NumberAttribute(null=True)


class Order(CounterMixin, Model):
    class Meta:
        table_name = "Orders"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    total = NumberAttribute()
    revenue = counted_by(Day.revenue, key=lambda o: o.day, amount=lambda o: int(o.total), create_parent=True,
                         parent_defaults=lambda o: {"expires": datetime(2027, 3, 1, tzinfo=timezone.utc)},
                         children=lambda key: sum(int(o.total) for o in Order.scan(consistent_read=True)
                                                  if o.day == key[0]))


@pytest.fixture
def orders(dynamodb: Any) -> None:
    Day.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Order.create_table(billing_mode="PAY_PER_REQUEST", wait=True)


def _bucket(day: str = "2026-11-30") -> Optional[Day]:
    try:
        return Day.get(day, consistent_read=True)
    except Day.DoesNotExist:
        return None


@pytest.mark.usefixtures("orders")
@pytest.mark.parametrize("new_total", [80, 130], ids=["lowered", "raised"])
def test_an_order_edited_after_its_day_expired_leaves_the_day_gone(new_total: int) -> None:
    """The day's bucket counted this order and expired: the edit's change of amount goes with it (listed in
    rollups_gone), whichever way it goes, as a delete's decrement does; a bucket is never re-created holding a
    difference."""
    Order(pk="o1", day="2026-11-30", total=100).save()
    Order(pk="o2", day="2026-11-30", total=50).save()
    Day._get_connection().delete_item("2026-11-30")  # expired
    order = Order.get("o1")
    order.total = new_total
    result = order.save()
    assert result.changes == ()
    assert result.rollups_gone == (CounterChange(Day, ("2026-11-30",), "revenue", new_total - 100, 0),)
    assert result.attempts == 2 and _bucket() is None
    assert Order.get("o1", consistent_read=True).total == new_total
    assert Order.get("o2").delete().rollups_gone == (CounterChange(Day, ("2026-11-30",), "revenue", -50, 0),)


@pytest.mark.usefixtures("orders")
def test_an_order_moved_from_an_expired_day_counts_on_its_new_day() -> None:
    Order(pk="o1", day="2026-11-29", total=10).save()
    Day._get_connection().delete_item("2026-11-29")
    order = Order.get("o1")
    order.day = "2026-11-30"
    result = order.save()
    assert result.rollups_gone == (CounterChange(Day, ("2026-11-29",), "revenue", -10, 0),)
    assert result.changes == (CounterChange(Day, ("2026-11-30",), "revenue", 10, 0),)
    assert _bucket("2026-11-29") is None and _bucket() is not None and _bucket().revenue == 10  # type: ignore


@pytest.mark.usefixtures("orders")
def test_a_first_count_of_zero_creates_its_bucket_with_its_counter_and_defaults() -> None:
    Order(pk="o1", day="2026-11-30", total=0).save()  # a free order
    bucket = _bucket()
    assert bucket is not None and bucket.revenue == 0
    assert bucket.expires == datetime(2027, 3, 1, tzinfo=timezone.utc)
    assert "revenue" in Day._get_connection().get_item("2026-11-30")["Item"]
    assert audit(Day.revenue).drifts == ()
    Order(pk="o2", day="2026-11-30", total=7).save()
    assert _bucket().revenue == 7  # type: ignore[union-attr]


@pytest.mark.usefixtures("orders")
def test_a_number_default_given_as_text_is_refused() -> None:
    with swapped(Order.revenue, "_parent_defaults", lambda o: {"region_code": "abc"}):
        with pytest.raises(ChildValueError, match="region_code"):
            Order(pk="o1", day="2026-11-30", total=1).save()
    assert _bucket() is None and list(Order.scan(consistent_read=True)) == []


def test_a_rollup_key_over_dynamodbs_key_limit_is_named_as_such_and_nothing_is_written() -> None:
    from pynamodb_counters.exceptions import ParentKeyError

    show()
    before = snapshot()
    with pytest.raises(ParentKeyError, match="1024 bytes"):
        clap("a", day="y" * 1100).save()
    assert snapshot() == before


def test_a_rollup_never_counts_into_another_models_item_in_a_table_without_a_discriminator() -> None:
    """The README's layout: posts, their likes and daily buckets in one table, no discriminator. A bucket key
    that names the post's own item is refused, whether the post's count is in the same write or not."""
    from pynamodb_counters.exceptions import ParentKeyError

    class Page(CounterMixin, Model):
        class Meta:
            table_name = "Pages"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        likes = CounterField()
        views = CounterField()

    class Daily(CounterMixin, Model):
        class Meta:
            table_name = "Pages"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        likes = CounterField()
        visits = CounterField()

    class Fan(CounterMixin, Model):
        class Meta:
            table_name = "Pages"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)  # "FAN#u1"
        day = UnicodeAttribute()
        page = counted_by(Page.likes, key=lambda f: (f.pk, "META"), prefix="FAN#")
        daily = counted_by(Daily.likes, key=lambda f: (f.pk, f.day), create_parent=True)

    class Visit(CounterMixin, Model):
        class Meta:
            table_name = "Pages"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)  # "VISIT#u1"
        day = UnicodeAttribute()
        daily = counted_by(Daily.visits, key=lambda v: (v.pk, v.day), create_parent=True)

    Page.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Page(pk="P", sk="META").save()
    Fan(pk="P", sk="FAN#u0", day="DAY#1").save()  # the page and a bucket, as meant
    before = sorted(str(item) for item in Page._get_connection().scan()["Items"])
    with pytest.raises(ParentKeyError, match="Page"):
        Fan(pk="P", sk="FAN#u1", day="META").save()  # its bucket's key is the page's item: both counts at once
    with pytest.raises(ParentNotFoundError, match="Page"):
        Visit(pk="P", sk="VISIT#u1", day="META").save()  # the bucket alone, on an item the page's likes fed
    assert sorted(str(item) for item in Page._get_connection().scan()["Items"]) == before
    assert Page.get("P", "META", consistent_read=True).likes == 1
    report = audit(Page.likes, parents=[("P", "META")])
    assert report.drifts == () and report.unverifiable == ()
