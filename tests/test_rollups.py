"""Rollups: parents created by their first count (a show's claps per day), with no existence guard on an
increment; a decrement never creates one, and a delete whose rollup expired still deletes the child."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterChange, CounterField, CounterMixin, audit, bulk_save, counted_by, repair
from pynamodb_counters.exceptions import ChildValueError, ConfigurationError, ParentNotFoundError
from tests.factories import snapshot
from tests.models import REGION, Clap, DailyClaps, Show

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


@pytest.mark.parametrize("defaults, complaint", [(lambda c: ["expires"], "must return a dict"),
                                                 (lambda c: {"claps": 3}, "not its counters"),
                                                 (lambda c: {"nope": 1}, "must return a dict"),
                                                 (lambda c: 1 / 0, "ZeroDivisionError")])
def test_parent_defaults_that_fail_or_name_other_things_write_nothing(defaults: Any, complaint: str) -> None:
    show()
    relation = Clap.daily  # immutable once declared: swapped here past its guard, and put back
    original = relation._parent_defaults
    object.__setattr__(relation, "_parent_defaults", defaults)
    before = snapshot()
    try:
        with pytest.raises(ChildValueError, match=complaint):
            clap("a").save()
    finally:
        object.__setattr__(relation, "_parent_defaults", original)
    assert snapshot() == before
    assert NumberAttribute  # noqa: B018  (imported for the models above)
