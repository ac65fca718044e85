"""Sharded counters on moto in-process: the layout of shard items, counted writes on shards, totals, audits and
repairs over shards, resharding, and the refusals that leave DynamoDB untouched.

``Video.view_count`` has 16 shards, ``Video.fan_count`` 4 (stored as ``fans``), ``Video.report_count`` none. The
shard a child lands on is computed here independently of the library (``zlib.crc32`` of its key), and every
check reads the raw items DynamoDB holds.
"""
from __future__ import annotations

import contextlib
import zlib
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import (
    MAX_SHARDS,
    CountedTransaction,
    CounterChange,
    CounterField,
    CounterMixin,
    audit,
    bulk_save,
    counted_by,
    repair,
    reshard,
    set_counter,
    skip_counting,
)
from pynamodb_counters.exceptions import (
    ConditionFailedError,
    ConfigurationError,
    CounterUnderflowError,
    InvalidArgumentError,
    InvalidTransactionError,
    ParentNotFoundError,
)
from tests.support.client_hooks import BeforeTransactions, recorded
from tests.support.factories import make_video, raw_client, stored, view
from tests.support.models import REGION, Fan, Report, Video, View

pytestmark = pytest.mark.usefixtures("dynamodb")

Key = Tuple[str, str]
VIEWS, FANS = 16, 4  # the shards tests/support/models.py declares


# -- what DynamoDB holds, read without the library -----------------------------------------------------------
def crc_shard(pk: str, sk: str, shards: int) -> int:
    """The shard a child keyed (pk, sk) lands on: crc32 of its serialized key parts joined by 0x1f."""
    return zlib.crc32(b"\x1f".join([pk.encode(), sk.encode()])) % shards


def table() -> List[Dict[str, Any]]:
    """Every item of the Videos table, raw, in a stable order (to compare before and after)."""
    return sorted(stored("Videos"), key=repr)


def shard_items(pk: str) -> Dict[int, Dict[str, Any]]:
    """A video's parent item (shard 0) and its shard items (``pk#SHARD<k>``), raw, by shard index."""
    found: Dict[int, Dict[str, Any]] = {}
    for item in stored("Videos"):
        hash_key = item["pk"]["S"]
        if item["sk"]["S"] != "META":
            continue
        if hash_key == pk:
            assert "_cshard" not in item
            found[0] = item
        elif hash_key.startswith(f"{pk}#SHARD"):
            index = int(item["_cshard"]["N"])
            assert hash_key == f"{pk}#SHARD{index}"
            found[index] = item
    return found


def shard_values(pk: str, attribute: str = "view_count") -> Dict[int, int]:
    """Each shard item's raw value of ``attribute`` (0 where absent), by shard index."""
    return {index: int(item.get(attribute, {"N": "0"})["N"]) for index, item in shard_items(pk).items()}


def children(pk: str, prefix: str = "VIEW#") -> List[str]:
    """The sort keys of a video's children under ``prefix``, as stored."""
    return sorted(item["sk"]["S"] for item in stored("Videos")
                  if item["pk"]["S"] == pk and item["sk"]["S"].startswith(prefix))


def children_by_shard(pk: str, shards: int, prefix: str = "VIEW#") -> Dict[int, int]:
    counts = {index: 0 for index in range(shards)}
    for sk in children(pk, prefix):
        counts[crc_shard(pk, sk, shards)] += 1
    return counts


def raw_update(pk: str, expression: str, value: int, sk: str = "META") -> None:
    """An UpdateItem behind the library's back (``:v`` is ``value``)."""
    raw_client(None).update_item(TableName="Videos", Key={"pk": {"S": pk}, "sk": {"S": sk}},
                                 UpdateExpression=expression, ExpressionAttributeValues={":v": {"N": str(value)}})


def shard_pk(pk: str, shard: int) -> str:
    return pk if shard == 0 else f"{pk}#SHARD{shard}"


# -- writing -------------------------------------------------------------------------------------------------


def user_on_shard(pk: str, shard: int, shards: int = VIEWS, prefix: str = "VIEW#USER#", skip: int = 0) -> str:
    """A user id whose child of ``pk`` (sort key ``prefix + id``) lands on ``shard``; ``skip`` picks a later one."""
    found = 0
    for n in range(100_000):
        if crc_shard(pk, f"{prefix}u{n}", shards) == shard:
            if found == skip:
                return f"u{n}"
            found += 1
    raise AssertionError(f"no user lands on shard {shard}")  # pragma: no cover


def change(pk: str, sk: str, delta: int, shards: int = VIEWS, attribute: str = "view_count") -> CounterChange:
    return CounterChange(Video, (pk, "META"), attribute, delta, crc_shard(pk, sk, shards))


@contextlib.contextmanager
def requests() -> Iterator[List[str]]:
    """The DynamoDB operations the library sends (seen through the transport seam, under either driver), listed
    as the block ends."""
    names: List[str] = []
    with recorded() as calls:
        yield names
    names.extend(call.operation for call in calls)


# -- 1. declarations -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shards", [0, -1, MAX_SHARDS + 1, True, "4", 2.0])
def test_a_counter_refuses_shards_out_of_range_at_class_definition(shards: Any) -> None:
    before = table()
    with pytest.raises(ConfigurationError, match=r"shards is a whole number from 1 .*to 100"):
        class Bad(CounterMixin, Model):
            class Meta:
                table_name = "ShardsBadDeclaration"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            hits = CounterField(shards=shards)
    assert table() == before


def test_a_counter_takes_up_to_max_shards() -> None:
    class Wide(CounterMixin, Model):
        class Meta:
            table_name = "ShardsWide"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        hits = CounterField(shards=MAX_SHARDS)
        plain = CounterField()

    assert MAX_SHARDS == 100
    assert Wide.hits.shards == 100 and Wide.plain.shards == 1


def test_a_sharded_counter_needs_a_string_hash_key() -> None:
    class Numbered(CounterMixin, Model):
        class Meta:
            table_name = "ShardsNumbered"
            region = REGION

        number = NumberAttribute(hash_key=True)
        hits = CounterField(shards=4)
        plain = CounterField()

    before = table()
    with pytest.raises(ConfigurationError, match="string hash key"):
        class Hit(CounterMixin, Model):
            class Meta:
                table_name = "ShardsNumberedHits"
                region = REGION

            number = NumberAttribute(hash_key=True)
            at = UnicodeAttribute(range_key=True)
            parent = counted_by(Numbered.hits, key=lambda hit: hit.number)
    with pytest.raises(ConfigurationError, match="string hash key"):
        reshard(Numbered.plain, 4, parents=[7])

    class PlainHit(CounterMixin, Model):  # the unsharded counter of the same model is fine
        class Meta:
            table_name = "ShardsNumberedPlainHits"
            region = REGION

        number = NumberAttribute(hash_key=True)
        at = UnicodeAttribute(range_key=True)
        parent = counted_by(Numbered.plain, key=lambda hit: hit.number)

    assert PlainHit.parent.parent_model is Numbered and PlainHit.parent.attribute == "plain"
    assert table() == before


# -- 2. a parent's shard items -------------------------------------------------------------------------------
def test_saving_a_video_creates_its_shard_items_once() -> None:
    with requests() as sent:
        Video(pk="VIDEO#v1", sk="META", title="cats").save()
    assert sent.count("TransactWriteItems") == 1 and sent.count("UpdateItem") == 1

    items = shard_items("VIDEO#v1")
    assert sorted(items) == list(range(VIEWS))
    assert items[0]["_cshards"] == {"N": str(VIEWS)}
    for index in range(1, VIEWS):
        assert items[index] == {"pk": {"S": f"VIDEO#v1#SHARD{index}"}, "sk": {"S": "META"},
                                "_cshard": {"N": str(index)}}
    assert items[0]["view_count"] == {"N": "0"} and items[0]["fans"] == {"N": "0"}
    assert len(stored("Videos")) == VIEWS

    before = table()
    video = Video.get("VIDEO#v1", "META")
    video.title = "dogs"
    with requests() as sent:
        video.save()
    assert sent == ["UpdateItem"]  # the shard items exist: no BatchGetItem, no TransactWriteItems
    after = table()
    assert len(after) == len(before) and Video.get("VIDEO#v1", "META").title == "dogs"
    assert [item for item in after if item["pk"]["S"] != "VIDEO#v1"] == \
        [item for item in before if item["pk"]["S"] != "VIDEO#v1"]  # shard items untouched


# -- 3. counted writes on shards -----------------------------------------------------------------------------
def test_children_are_counted_on_the_shard_their_key_chooses() -> None:
    key = make_video()
    pk = key[0]
    for n in range(60):
        sk = f"VIEW#USER#{n}"
        assert View(pk=pk, sk=sk).save().changes == (change(pk, sk, +1),)
    for n in range(20):
        sk = f"FAN#USER#{n}"
        assert Fan(pk=pk, sk=sk).save().changes == (change(pk, sk, +1, FANS, "fan_count"),)
    result = Report(pk=pk, sk="REPORT#USER#1").save()
    assert result.changes == (CounterChange(Video, key, "report_count", 1, 0),)

    for n in range(0, 60, 4):  # the delete of a child decrements the shard its save incremented
        sk = f"VIEW#USER#{n}"
        assert View.get(pk, sk).delete().changes == (change(pk, sk, -1),)
    for n in range(0, 20, 5):
        sk = f"FAN#USER#{n}"
        assert Fan.get(pk, sk).delete().changes == (change(pk, sk, -1, FANS, "fan_count"),)

    views = children(pk)
    assert len(views) == 45
    assert shard_values(pk) == children_by_shard(pk, VIEWS)
    assert {k: v for k, v in shard_values(pk, "fans").items() if k < FANS} == children_by_shard(pk, FANS, "FAN#")
    assert all(v == 0 for k, v in shard_values(pk, "fans").items() if k >= FANS)
    assert Video.view_count.total(key) == 45 == Video.view_count.total(key, consistent_read=True)
    assert Video.fan_count.total(key) == 16
    assert Video.report_count.total(key) == 1

    loaded = Video.get(*key)
    assert loaded.view_count == children_by_shard(pk, VIEWS)[0] == shard_values(pk)[0]  # the parent's share only
    assert loaded.view_count != 45
    assert loaded.fan_count == children_by_shard(pk, FANS, "FAN#")[0]
    assert loaded.report_count == 1
    assert Video.view_count.total(loaded) == 45  # an instance works as well as a key


# -- 4. parents that cannot count ----------------------------------------------------------------------------
def test_a_view_of_a_missing_video_writes_nothing() -> None:
    make_video("VIDEO#other")
    before = table()
    for shard in (0, 5):
        user = user_on_shard("VIDEO#gone", shard)
        with pytest.raises(ParentNotFoundError) as caught:
            view("VIDEO#gone", user).save()
        assert caught.value.model is Video and caught.value.key == ("VIDEO#gone", "META")
        assert "does not exist" in str(caught.value) and (f"shard {shard}" in str(caught.value)) == (shard > 0)
        assert table() == before


def test_a_view_of_a_video_stored_without_its_shard_items_creates_them_first() -> None:
    """A video stored before its counter was sharded (by code still running during a deploy) has no shard items:
    the first counted write that needs one creates them, then lands."""
    with skip_counting(Video):
        Video(pk="VIDEO#raw", sk="META", title="imported").save()  # a plain PutItem: no shard items
    raw_client(None).put_item(TableName="Videos", Item={"pk": {"S": "VIDEO#put"}, "sk": {"S": "META"}})
    assert sorted(shard_items("VIDEO#raw")) == [0] and sorted(shard_items("VIDEO#put")) == [0]
    for pk in ("VIDEO#raw", "VIDEO#put"):
        with requests() as sent:
            result = view(pk, user_on_shard(pk, 3)).save()
        assert sent == ["TransactWriteItems", "BatchGetItem", "TransactWriteItems", "TransactWriteItems"]
        assert result.changes == (CounterChange(Video, (pk, "META"), "view_count", 1, 3),)
        assert sorted(shard_items(pk)) == list(range(VIEWS))
        view(pk, user_on_shard(pk, 15)).save()
        assert Video.view_count.total((pk, "META")) == 2
        assert shard_values(pk) == children_by_shard(pk, VIEWS)
    assert reshard(Video.view_count, VIEWS, parents=[("VIDEO#put", "META")]) == 0


def test_a_bulk_write_on_a_video_without_shard_items_creates_them() -> None:
    """Bulk writes commit through the same pipeline as save(): a parent stored before its counter was sharded
    gets its shard items, and the child is counted."""
    raw_client(None).put_item(TableName="Videos", Item={"pk": {"S": "VIDEO#put"}, "sk": {"S": "META"}})
    result = bulk_save([view("VIDEO#put", user_on_shard("VIDEO#put", 15))])
    assert result.rejected == [] and len(result.added) == 1
    assert sorted(shard_items("VIDEO#put")) == list(range(VIEWS))
    assert Video.view_count.total(("VIDEO#put", "META")) == 1 == shard_values("VIDEO#put")[15]


# -- 5. floors -----------------------------------------------------------------------------------------------
def test_a_sharded_counter_has_no_floor_but_an_unsharded_one_keeps_it() -> None:
    key = make_video()
    pk = key[0]
    for shard in (0, 6):
        user = user_on_shard(pk, shard)
        view(pk, user).save()
        assert shard_values(pk)[shard] == 1
        raw_update(shard_pk(pk, shard), "SET view_count = :v", 0)  # drifted to 0 with one child
        result = View.get(pk, f"VIEW#USER#{user}").delete()
        assert result.changes == (CounterChange(Video, key, "view_count", -1, shard),)
        assert shard_values(pk)[shard] == -1
    assert Video.view_count.total(key) == -2
    assert children(pk) == []

    Report(pk=pk, sk="REPORT#USER#1").save()
    raw_update(pk, "SET report_count = :v", 0)
    before = table()
    with pytest.raises(CounterUnderflowError) as caught:
        Report.get(pk, "REPORT#USER#1").delete()
    assert caught.value.attribute == "report_count" and caught.value.stored == 0
    assert table() == before


# -- 6. totals -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_totals_read_many_parents_and_leave_out_missing_ones() -> None:
    keys = [make_video(f"VIDEO#{n}") for n in range(8)]  # 8 x 16 shard items: more than one BatchGetItem
    for n, (pk, _) in enumerate(keys):
        for u in range(n):
            view(pk, u).save()
        for u in range(8 - n):
            Fan(pk=pk, sk=f"FAN#USER#{u}").save()
    missing = [("VIDEO#gone", "META"), ("VIDEO#nope", "META")]
    with requests() as sent:
        totals = Video.view_count.totals(missing[:1] + keys + missing[1:] + keys[:2])
    assert totals == {key: n for n, key in enumerate(keys)}
    assert set(sent) == {"BatchGetItem"} and len(sent) >= 2
    assert Video.fan_count.totals([Video.get(*key) for key in keys[:3]]) == {keys[0]: 8, keys[1]: 7, keys[2]: 6}
    assert Video.report_count.totals(keys[:2]) == {keys[0]: 0, keys[1]: 0}
    assert Video.view_count.totals(missing) == {}
    assert Video.view_count.total(keys[5]) == 5

    before = table()
    with pytest.raises(Video.DoesNotExist):
        Video.view_count.total(missing[0])
    assert table() == before


# -- 7. audits and repairs -----------------------------------------------------------------------------------
def test_an_audit_sums_the_shards_and_a_repair_fixes_the_drift() -> None:
    keys = [make_video(f"VIDEO#{n}") for n in range(3)]
    for n, (pk, _) in enumerate(keys):
        for u in range(10 + n):
            view(pk, u).save()
        for u in range(3):
            Fan(pk=pk, sk=f"FAN#USER#{u}").save()
    assert audit(Video.view_count).drifts == ()

    pk = keys[1][0]
    drifted_shard = next(index for index, value in shard_values(pk).items() if index > 0 and value > 0)
    raw_update(shard_pk(pk, drifted_shard), "ADD view_count :v", 3)  # a shard item drifts by +3

    report = audit(Video.view_count)
    assert report.parents_checked == 3  # shard items, views and fans are never parents
    [drift] = report.drifts
    assert (drift.key, drift.attribute, drift.stored, drift.actual) == (keys[1], "view_count", 14, 11)
    assert audit(View.video, parents=[keys[1]]).drifts[0].stored == 14
    fans_report = audit(Video.fan_count)
    assert fans_report.parents_checked == 3 and fans_report.drifts == ()

    result = repair(report.drifts)
    assert [r.status for r in result.repairs] == ["repaired"]
    assert audit(Video.view_count).drifts == ()
    assert Video.view_count.totals(keys) == {keys[0]: 10, keys[1]: 11, keys[2]: 12}
    assert sum(shard_values(pk).values()) == 11 == len(children(pk))


def test_a_repair_of_the_unsharded_counter_of_a_sharded_model() -> None:
    key = make_video()
    pk = key[0]
    for u in range(5):
        view(pk, u).save()  # these move the shard items' own counted-write sequences
        Report(pk=pk, sk=f"REPORT#USER#{u}").save()
    raw_update(pk, "SET report_count = :v", 9)

    report = audit(Video.report_count)
    assert report.parents_checked == 1
    [drift] = report.drifts
    assert (drift.stored, drift.actual) == (9, 5)
    result = repair(report.drifts)
    assert [r.status for r in result.repairs] == ["repaired"], result.repairs
    assert audit(Video.report_count).drifts == ()
    assert Video.get(*key).report_count == 5


# -- 8. set_counter ------------------------------------------------------------------------------------------
def test_set_counter_sets_a_sharded_total() -> None:
    key = make_video()
    pk = key[0]
    for u in range(30):
        view(pk, u).save()
    set_counter(Video.view_count, key, 50)
    assert Video.view_count.total(key) == 50
    assert {k: v for k, v in shard_values(pk).items() if k > 0} == \
        {k: v for k, v in children_by_shard(pk, VIEWS).items() if k > 0}  # only the parent's share moved

    before = table()
    with pytest.raises(ConditionFailedError):
        set_counter(Video.view_count, key, 30, expected=30)
    assert table() == before
    with pytest.raises(ConditionFailedError):
        set_counter(Video.view_count, ("VIDEO#gone", "META"), 1)
    assert table() == before

    set_counter(Video.view_count, key, 30, expected=50)
    assert Video.view_count.total(key) == 30
    assert audit(Video.view_count).drifts == ()
    set_counter(Video.fan_count, key, 4)
    assert Video.fan_count.total(key) == 4


# -- 9. resharding -------------------------------------------------------------------------------------------
def test_reshard_grows_an_unsharded_counter_and_counts_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Video.view_count, "shards", 1)  # the code as deployed before sharding views
    key = make_video()
    other = make_video("VIDEO#quiet")
    pk = key[0]
    # 12 views counted on the parent item; three of them will land on shard 5 once views have 8 shards
    hot = [user_on_shard(pk, 5, 8, skip=n) for n in range(3)]
    early = hot + [f"e{n}" for n in range(30) if crc_shard(pk, f"VIEW#USER#e{n}", 8) != 5][:9]
    for user in early:
        assert view(pk, user).save().changes == (CounterChange(Video, key, "view_count", 1, 0),)
    for u in range(5):
        Fan(pk=pk, sk=f"FAN#USER#{u}").save()
    assert shard_values(pk) == {0: 12, 1: 0, 2: 0, 3: 0}  # fans' 4 shards exist already
    assert shard_items(pk)[0]["_cshards"] == {"N": "4"}

    assert reshard(Video.view_count, 8) == 2
    items = shard_items(pk)
    assert sorted(items) == list(range(8)) and items[0]["_cshards"] == {"N": "8"}
    assert all(items[index]["_cshard"] == {"N": str(index)} for index in range(1, 8))
    assert shard_values(pk) == {0: 12, **{index: 0 for index in range(1, 8)}}
    assert sorted(shard_items(other[0])) == list(range(8))
    assert Video.view_count.total(key) == 12 and Video.fan_count.total(key) == 5
    assert reshard(Video.view_count, 8) == 0

    monkeypatch.setattr(Video.view_count, "shards", 8)  # deploy shards=8
    expected = {index: 0 for index in range(8)}
    expected[0] = 12
    late = [f"n{n}" for n in range(60) if crc_shard(pk, f"VIEW#USER#n{n}", 8) != 5][:30]
    for user in late:
        sk = f"VIEW#USER#{user}"
        assert View(pk=pk, sk=sk).save().changes == (change(pk, sk, +1, 8),)
        expected[crc_shard(pk, sk, 8)] += 1
    for user in early[:8] + late[:4]:  # views saved before and after resharding
        sk = f"VIEW#USER#{user}"
        assert View.get(pk, sk).delete().changes == (change(pk, sk, -1, 8),)
        expected[crc_shard(pk, sk, 8)] -= 1

    assert shard_values(pk) == expected
    assert expected[5] == -3  # shard 5 took the deletes of three views counted on the parent: no floor
    assert Video.view_count.total(key) == len(children(pk)) == 12 + 30 - 8 - 4
    assert Video.fan_count.total(key) == 5
    report = audit(Video.view_count)
    assert report.parents_checked == 2 and report.drifts == ()
    assert audit(Video.fan_count).drifts == ()


@pytest.mark.slow
def test_reshard_shrinks_after_the_deploy_and_keeps_every_count(monkeypatch: pytest.MonkeyPatch) -> None:
    key = make_video()
    other = make_video("VIDEO#w2")
    pk = key[0]
    for u in range(80):
        view(pk, u).save()
    for u in range(10):
        view(other[0], u).save()
    for u in range(12):
        Fan(pk=pk, sk=f"FAN#USER#{u}").save()
    views_before = shard_values(pk)
    fans_before = shard_values(pk, "fans")
    assert sorted(views_before) == list(range(VIEWS))
    assert sum(value for index, value in views_before.items() if index >= 2) > 0

    monkeypatch.setattr(Video.view_count, "shards", 2)  # deploy shards=2 first
    assert Video.view_count.total(key) == 80  # still reads shards 2..15, through the parent's _cshards
    assert Video.view_count.totals([key, other]) == {key: 80, other: 10}
    assert audit(Video.view_count).drifts == ()

    assert reshard(Video.view_count, 2) == 2
    items = shard_items(pk)
    assert sorted(items) == [0, 1, 2, 3]  # fans still use shards 1..3
    assert items[0]["_cshards"] == {"N": "4"}
    views_after = shard_values(pk)
    assert views_after[0] == views_before[0] + sum(value for index, value in views_before.items() if index >= 2)
    assert views_after[1] == views_before[1]
    assert views_after[2] == views_after[3] == 0
    assert shard_values(pk, "fans") == {index: fans_before[index] for index in range(4)}
    assert Video.view_count.total(key) == 80 and Video.fan_count.total(key) == 12
    assert Video.view_count.totals([key, other]) == {key: 80, other: 10}

    before = table()
    assert reshard(Video.view_count, 2) == 0
    assert table() == before

    for u in range(200, 210):
        sk = f"VIEW#USER#{u}"
        assert View(pk=pk, sk=sk).save().changes == (change(pk, sk, +1, 2),)
    for u in range(0, 80, 3):  # views counted on 16 shards, uncounted on 2
        sk = f"VIEW#USER#{u}"
        assert View.get(pk, sk).delete().changes == (change(pk, sk, -1, 2),)
    assert Video.view_count.total(key) == len(children(pk)) == 80 + 10 - 27
    assert sorted(shard_items(pk)) == [0, 1, 2, 3]
    assert audit(Video.view_count).drifts == ()


@pytest.mark.parametrize("shards", [0, MAX_SHARDS + 1, True])
def test_reshard_refuses_shards_out_of_range(shards: Any) -> None:
    key = make_video()
    view(key[0], 1).save()
    before = table()
    with pytest.raises(InvalidArgumentError, match="from 1 to 100"):
        reshard(Video.view_count, shards)
    with pytest.raises(InvalidArgumentError):
        reshard(Video.view_count, shards, parents=[key])
    assert table() == before


# -- 10. deleting a parent -----------------------------------------------------------------------------------
def test_deleting_a_video_deletes_its_shard_items() -> None:
    key = make_video()
    other = make_video("VIDEO#v2")
    for u in range(20):
        view(key[0], u).save()
    untouched = [item for item in table() if not item["pk"]["S"].startswith("VIDEO#v1")]
    with requests() as sent:
        Video.get(*key).delete()
    assert sent.count("TransactWriteItems") == 1
    assert shard_items(key[0]) == {}
    assert [item for item in table() if not item["pk"]["S"].startswith("VIDEO#v1")] == untouched
    assert sorted(shard_items(other[0])) == list(range(VIEWS))
    with pytest.raises(Video.DoesNotExist):
        Video.view_count.total(key)


def test_deleting_a_video_after_a_shrink_deploy_waits_for_the_reshard(monkeypatch: pytest.MonkeyPatch) -> None:
    key = make_video()
    for u in range(40):
        view(key[0], u).save()
    monkeypatch.setattr(Video.view_count, "shards", 2)  # deployed; reshard() not run yet
    assert Video.view_count.total(key) == 40
    before = table()
    with pytest.raises(ConditionFailedError, match="16 shards recorded.*reshard"):
        Video.get(*key).delete()  # shard items 4..15 hold counts: none may be left behind
    assert table() == before
    reshard(Video.view_count, 2)
    Video.get(*key).delete()
    assert shard_items(key[0]) == {}


# -- 11. transactions ----------------------------------------------------------------------------------------
def test_a_transaction_creates_a_new_videos_shards_with_it() -> None:
    with requests() as sent:
        with CountedTransaction() as transaction:
            transaction.save(Video(pk="VIDEO#t1", sk="META", title="new"))
    assert sent == ["TransactWriteItems"]
    items = shard_items("VIDEO#t1")
    assert sorted(items) == list(range(VIEWS)) and items[0]["_cshards"] == {"N": str(VIEWS)}
    assert items[0]["title"] == {"S": "new"}
    assert transaction.result is not None and transaction.result.changes == ()

    view("VIDEO#t1", user_on_shard("VIDEO#t1", 9)).save()
    assert Video.view_count.total(("VIDEO#t1", "META")) == 1


def test_a_transaction_cannot_count_a_view_on_the_video_it_saves() -> None:
    make_video("VIDEO#other")
    before = table()
    for shard in (0, 11):  # on the parent item, and on a shard item the transaction creates
        user = user_on_shard("VIDEO#t2", shard)
        with requests() as sent:
            with pytest.raises(InvalidTransactionError):
                with CountedTransaction() as transaction:
                    transaction.save(Video(pk="VIDEO#t2", sk="META"))
                    transaction.save(view("VIDEO#t2", user))
        assert sent == []
        assert table() == before


def test_a_transaction_saving_a_video_after_a_shrink_deploy_keeps_its_total(monkeypatch: pytest.MonkeyPatch) -> None:
    key = make_video()
    for u in range(40):
        view(key[0], u).save()
    monkeypatch.setattr(Video.view_count, "shards", 2)  # deployed; reshard() not run yet
    assert Video.view_count.total(key) == 40
    video = Video.get(*key)
    video.title = "renamed"
    with CountedTransaction() as transaction:
        transaction.save(video)
    assert Video.get(*key).title == "renamed"
    assert Video.view_count.total(key) == 40  # shards 2..15 must still be read until reshard() folds them
    reshard(Video.view_count, 2)
    assert Video.view_count.total(key) == 40
    assert audit(Video.view_count).drifts == ()


# -- 12. bulk writes -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_bulk_save_counts_every_view_on_its_shard() -> None:
    keys = [make_video(f"VIDEO#b{n}") for n in range(4)]
    views = [view(keys[n % 4][0], n) for n in range(320)]
    fans = [Fan(pk=keys[n % 4][0], sk=f"FAN#USER#{n}") for n in range(40)]
    result = bulk_save([*views, *fans])
    assert [outcome.status for outcome in result.outcomes] == ["added"] * 360
    assert result.rejected == [] and result.failed == []
    assert Video.view_count.totals(keys) == {key: 80 for key in keys}
    assert Video.fan_count.totals(keys) == {key: 10 for key in keys}
    for pk, _ in keys:
        assert len(children(pk)) == 80
        assert shard_values(pk) == children_by_shard(pk, VIEWS)
        assert {k: v for k, v in shard_values(pk, "fans").items() if k < FANS} == \
            children_by_shard(pk, FANS, "FAN#")
    committed = sorted((c.key[0], c.attribute, c.delta, c.shard) for r in result.results for c in r.changes)
    assert committed == sorted([(v.pk, "view_count", 1, crc_shard(v.pk, v.sk, VIEWS)) for v in views]
                               + [(f.pk, "fan_count", 1, crc_shard(f.pk, f.sk, FANS)) for f in fans])
    report = audit(Video.view_count)
    assert report.parents_checked == 4 and report.drifts == ()


# -- the window between deploying fewer shards and running reshard() -----------------------------------------
def test_shrinking_to_one_shard_lifts_the_floor_and_guards_the_delete_until_the_fold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = make_video()
    pk = key[0]
    users = [user_on_shard(pk, shard) for shard in (2, 9, 13)]  # views counted on shard items, not the parent
    for user in users:
        view(pk, user).save()
    monkeypatch.setattr(Video.view_count, "shards", 1)  # the deploy: no sharded counter left on Video
    monkeypatch.setattr(Video.fan_count, "shards", 1)
    assert Video.view_count.total(key) == 3  # the recorded shards are still read
    view(pk, users[0]).delete()  # the parent item holds 0 of the 3: its floor waits for the fold
    assert shard_values(pk)[0] == -1 and Video.view_count.total(key) == 2

    before = table()
    with pytest.raises(ConditionFailedError, match="16 shards recorded.*reshard"):
        Video.get(*key).delete()  # a plain DeleteItem would leave 15 shard items behind
    assert table() == before

    assert reshard(Video.view_count, 1) == 1
    assert sorted(shard_items(pk)) == [0] and shard_values(pk)[0] == 2
    raw_update(pk, "SET view_count = :v", 0)  # drift
    with pytest.raises(CounterUnderflowError):  # the fold done, the floor is back
        view(pk, users[1]).delete()
    Video.get(*key).delete()
    assert shard_items(pk) == {}


def test_growing_a_busy_parent_does_not_wait_for_it_to_hold_still(monkeypatch: pytest.MonkeyPatch,
                                                                   transactions: BeforeTransactions) -> None:
    """Creating shard items and recording them needs no counted-write sequence: a like landing on the parent
    between reshard()'s read and its write does not cancel it."""
    monkeypatch.setattr(Video.view_count, "shards", 1)
    key = make_video()
    landed: List[int] = []

    def like_meanwhile() -> None:
        landed.append(1)  # before every attempt, between its read and its write
        view(key[0], f"meanwhile{len(landed)}").save()

    transactions.watch({attempt: like_meanwhile for attempt in range(1, 9)})
    assert reshard(Video.view_count, 8) == 1 and len(landed) == 1
    assert Video.view_count.total(key) == 1 and sorted(shard_items(key[0])) == list(range(8))


# -- 13. another item stored at a shard key ------------------------------------------------------------------
# A video's shard k is the item keyed ``<pk>#SHARD<k>``; another video may have chosen that key itself. The library
# never deletes, marks, counts into or sums such an item: it did not write it.
COLLIDES = r"holds another item.*not a shard item.*cannot end in '#SHARD<k>'.*move that item"


def raw_item(pk: str, sk: str = "META") -> Dict[str, Any]:
    """One item of the Videos table as DynamoDB holds it (``{}`` when absent)."""
    response = raw_client(None).get_item(TableName="Videos", Key={"pk": {"S": pk}, "sk": {"S": sk}},
                                         ConsistentRead=True)
    return dict(response.get("Item", {}))


def video_at_a_shard_key(pk: str, shard: int, views: int = 0) -> Key:
    """Another video, stored (and counting ``views`` views on its own item) at the key of shard ``shard`` of video
    ``pk``, whose own shard item there is gone (deleted behind the library's back, or never created)."""
    raw_client(None).delete_item(TableName="Videos", Key={"pk": {"S": shard_pk(pk, shard)}, "sk": {"S": "META"}})
    other = make_video(shard_pk(pk, shard), title="someone else's")
    for n in range(views):
        view(other[0], user_on_shard(other[0], 0, skip=n)).save()
    assert "_cshard" not in raw_item(other[0]) and raw_item(other[0])["title"] == {"S": "someone else's"}
    return other


class Playlist(CounterMixin, Model):
    """A parent of songs, in a table of its own."""

    class Meta:
        table_name = "ShardsPlaylists"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "LIST#a"
    sk = UnicodeAttribute(range_key=True)  # "META"
    song_count = CounterField()


class Song(CounterMixin, Model):
    """A counted child of its playlist that is a sharded parent too: its plays, over 4 items
    (``<pk>#SHARD<k>``, ``SONG#n``), which its own counted save creates and its counted delete deletes."""

    class Meta:
        table_name = "ShardsPlaylists"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)  # "LIST#a"
    sk = UnicodeAttribute(range_key=True)  # "SONG#1"
    play_count = CounterField(shards=4)
    playlist = counted_by(Playlist.song_count, key=lambda song: (song.pk, "META"), prefix="SONG#")


def test_deleting_a_video_never_deletes_another_item_stored_at_one_of_its_shard_keys() -> None:
    key = make_video("VIDEO#launch")
    other = video_at_a_shard_key("VIDEO#launch", 1, views=2)
    before = table()
    refused = rf"Video \('VIDEO#launch', 'META'\).*shard 1.*'VIDEO#launch#SHARD1'.*{COLLIDES}.*nothing was written"
    with pytest.raises(ConditionFailedError, match=refused) as caught:
        Video.get(*key).delete()
    assert caught.value.model is Video and caught.value.key == key
    assert table() == before  # the video, its other shard items and the other video: all as they were
    with pytest.raises(ConditionFailedError, match=COLLIDES):
        with CountedTransaction() as transaction:
            transaction.delete(Video.get(*key))
    assert table() == before
    assert Video.get(*other).title == "someone else's" and Video.view_count.total(other) == 2

    with pytest.raises(ConditionFailedError, match=rf"shard 1.*'VIDEO#launch#SHARD1'.*{COLLIDES}"):
        view(key[0], user_on_shard(key[0], 1)).save()  # a view that lands on shard 1 never counts into it
    assert table() == before
    view(key[0], user_on_shard(key[0], 2)).save()  # its other shards count
    assert Video.view_count.total(key) == 1 and Video.view_count.total(other) == 2


def test_saving_a_video_never_marks_another_item_at_its_shard_key_as_a_shard() -> None:
    other = video_at_a_shard_key("VIDEO#launch", 1, views=2)
    foreign = raw_item(other[0])
    with pytest.raises(ConditionFailedError, match=rf"Video \('VIDEO#launch', 'META'\) itself was saved.*"
                                                   rf"shard items were not created.*shard 1.*{COLLIDES}"):
        Video(pk="VIDEO#launch", sk="META", title="mine").save()
    assert raw_item(other[0]) == foreign  # not marked a shard, nothing of it changed
    assert raw_item("VIDEO#launch")["title"] == {"S": "mine"}  # the parent's own UpdateItem, as the error says
    assert "_cshards" not in raw_item("VIDEO#launch")
    assert all(raw_item(f"VIDEO#launch#SHARD{shard}") == {} for shard in range(2, VIEWS))  # refused as a whole

    make_video("VIDEO#fresh#SHARD3")
    before = table()
    with pytest.raises(ConditionFailedError, match=rf"shard 3.*'VIDEO#fresh#SHARD3'.*{COLLIDES}"):
        with CountedTransaction() as transaction:  # the video and its shard items in one transaction
            transaction.save(Video(pk="VIDEO#fresh", sk="META"))
    assert table() == before


def test_totals_and_audits_never_count_another_item_stored_at_a_shard_key() -> None:
    key = make_video("VIDEO#launch")
    for shard in (0, 2, 7):
        view(key[0], user_on_shard(key[0], shard)).save()
    other = video_at_a_shard_key("VIDEO#launch", 1, views=4)  # 4 views counted on the item at shard 1's key
    assert Video.view_count.total(key) == 3 == Video.view_count.total(key, consistent_read=True)
    assert Video.view_count.totals([key, other]) == {key: 3, other: 4}
    report = audit(Video.view_count)
    assert report.parents_checked == 2 and report.drifts == ()
    assert audit(Video.view_count, parents=[key]).drifts == ()

    raw_update(key[0], "ADD view_count :v", 5)  # the video's own item drifts
    [drift] = audit(Video.view_count).drifts
    assert (drift.key, drift.stored, drift.actual) == (key, 8, 3)
    foreign = raw_item(other[0])
    assert [r.status for r in repair([drift]).repairs] == ["repaired"]
    set_counter(Video.view_count, key, 3)
    assert raw_item(other[0]) == foreign
    assert Video.view_count.totals([key, other]) == {key: 3, other: 4}
    assert audit(Video.view_count).drifts == ()


def test_reshard_never_marks_folds_or_deletes_another_item_stored_at_a_shard_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with skip_counting(Video):
        Video(pk="VIDEO#launch", sk="META", title="mine").save()  # stored before sharding: no shard items
    other = make_video("VIDEO#launch#SHARD1", title="someone else's")
    view(other[0], user_on_shard(other[0], 0)).save()
    before = table()
    for parents in ([("VIDEO#launch", "META")], None):
        with pytest.raises(ConditionFailedError, match=rf"Video \('VIDEO#launch', 'META'\).*shard 1.*{COLLIDES}.*"
                                                       r"nothing was written"):
            reshard(Video.view_count, VIEWS, parents=parents)
        assert table() == before
    with pytest.raises(ParentNotFoundError, match="shard 2"):  # its first view on a shard: no shard is created
        view("VIDEO#launch", user_on_shard("VIDEO#launch", 2)).save()
    assert table() == before

    key = make_video("VIDEO#big")  # a video sharded 16 ways, shrunk to 2 views shards (fans keep 4)
    for u in range(30):
        view(key[0], u).save()
    big = video_at_a_shard_key(key[0], 9, views=1)  # shard 9, about to be folded, holds another video
    counted = len(children(key[0])) - sum(crc_shard(key[0], sk, VIEWS) == 9 for sk in children(key[0]))
    assert Video.view_count.total(key) == counted
    foreign = raw_item(big[0])
    monkeypatch.setattr(Video.view_count, "shards", 2)
    assert reshard(Video.view_count, 2, parents=[key]) == 1
    assert raw_item(big[0]) == foreign  # neither folded into the video nor deleted
    assert Video.view_count.totals([key, big]) == {key: counted, big: 1}
    assert all(raw_item(shard_pk(key[0], shard)) == {} for shard in range(4, VIEWS) if shard != 9)


def test_a_song_that_is_a_sharded_parent_never_takes_another_songs_key_for_its_shard_item() -> None:
    """A counted child that is itself a sharded parent creates its shard items in its own counted save and
    deletes them in its counted delete: neither touches a song of another playlist stored at a shard key."""
    Playlist.create_table(billing_mode="PAY_PER_REQUEST")
    for pk in ("LIST#a", "LIST#a#SHARD1", "LIST#a#SHARD2"):
        Playlist(pk=pk, sk="META").save()
    Song(pk="LIST#a#SHARD2", sk="SONG#1").save()  # a song of playlist LIST#a#SHARD2: song 1's shard 2 key

    def playlists() -> List[Dict[str, Any]]:
        return sorted(stored("ShardsPlaylists"), key=repr)

    before = playlists()
    with pytest.raises(ConditionFailedError, match=rf"Song \('LIST#a', 'SONG#1'\).*shard 2.*{COLLIDES}"):
        Song(pk="LIST#a", sk="SONG#1").save()
    assert playlists() == before  # the song not created nor counted, the other song not marked a shard

    Song(pk="LIST#a", sk="SONG#2").save()  # its shard items created with it
    raw_client(None).delete_item(TableName="ShardsPlaylists",
                                 Key={"pk": {"S": "LIST#a#SHARD1"}, "sk": {"S": "SONG#2"}})
    Song(pk="LIST#a#SHARD1", sk="SONG#2").save()  # another playlist's song, at song 2's shard 1 key
    before = playlists()
    with pytest.raises(ConditionFailedError, match=rf"Song \('LIST#a', 'SONG#2'\).*shard 1.*{COLLIDES}"):
        Song.get("LIST#a", "SONG#2").delete()
    assert playlists() == before
    assert Playlist.song_count.totals([("LIST#a", "META"), ("LIST#a#SHARD1", "META")]) == \
        {("LIST#a", "META"): 1, ("LIST#a#SHARD1", "META"): 1}


def test_a_parent_whose_key_is_another_parents_shard_item_never_saves_or_deletes_over_it() -> None:
    """The reverse collision: ``VIDEO#launch``'s shard items exist, and a video is saved, or deleted, under the
    key of one of them. Its save would write into the shard item and its delete would remove it, with the counts
    it holds: both are refused, nothing written."""
    key = make_video("VIDEO#launch")
    view(key[0], user_on_shard(key[0], 1)).save()  # one view, counted on shard 1
    before = table()
    squatter = Video(pk=shard_pk("VIDEO#launch", 1), sk="META", title="mine")
    with pytest.raises(ConditionFailedError, match=r"is a shard item of another Video.*Nothing was written"):
        squatter.save()
    with pytest.raises(ConditionFailedError, match=r"is a shard item of another Video"):
        Video(pk=shard_pk("VIDEO#launch", 1), sk="META").delete()
    with pytest.raises(ConditionFailedError, match=r"is a shard item of another Video"):
        with CountedTransaction() as transaction:
            transaction.save(Video(pk=shard_pk("VIDEO#launch", 1), sk="META", title="mine"))
    with pytest.raises(ConditionFailedError, match=r"is a shard item of another Video"):
        with CountedTransaction() as transaction:
            transaction.delete(Video(pk=shard_pk("VIDEO#launch", 1), sk="META"))
    assert table() == before and Video.view_count.total(key) == 1
