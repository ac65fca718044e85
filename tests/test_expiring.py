"""Children that expire (issue 22): :func:`pynamodb_counters.streams.count_expiries` takes the counts of children
deleted by DynamoDB's TTL off their parents from the table's stream, exactly once; relations of a model with a
``TTLAttribute`` say how its expiries are counted.

moto writes real stream records but never expires an item: each test deletes items around the library, reads
moto's records with ``GetRecords`` and marks the deletions it made as DynamoDB's TTL marks its own
(:mod:`tests.support.stream_records`).
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Set

import pytest
from botocore.exceptions import ReadTimeoutError
from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.constants import STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from pynamodb_counters import (
    CountedTransaction,
    CounterField,
    CounterMixin,
    audit,
    bulk_save,
    counted_by,
    item_bytes,
    skip_counting,
    write_units,
)
from pynamodb_counters.declare._expiry_rules import MARKER, MARKER_LIFETIME
from pynamodb_counters.declare._spec import feeders_of
from pynamodb_counters.exceptions import ChildValueError, ConfigurationError, InvalidArgumentError
from pynamodb_counters.signals import child_removed, duplicate_rejected
from pynamodb_counters.streams import ExpiryResult, count_expiries, not_a_marker
from pynamodb_counters.testing import lambda_event, stream_records
from tests.support.client_hooks import hooked, transact_requests
from tests.support.factories import raw_client, stored
from tests.support.models import DailyInvites, Invite, Session, Team
from tests.support.stream_records import RawKey, expire, ttl_marked
from tests.test_declarations import refused

pytestmark = pytest.mark.usefixtures("dynamodb")

TEAM = "TEAM#t1"
PAST = datetime(2026, 1, 1, tzinfo=timezone.utc)


def team(pk: str = TEAM) -> None:
    Team(pk=pk, sk="META").save()


def invite(name: str, pk: str = TEAM, **attributes: Any) -> Invite:
    made = Invite(pk=pk, sk=f"INVITE#{name}", expires=PAST, **attributes)
    made.save()
    return made


def counters(pk: str = TEAM) -> Dict[str, int]:
    stored_team = Team.get(pk, "META", consistent_read=True)
    return {"invites": stored_team.invites, "pending": stored_team.pending, "seats": stored_team.seats,
            "load": Team.load.total((pk, "META"), consistent_read=True), "sent": stored_team.sent,
            "online": stored_team.online}


def daily(pk: str = TEAM, day: str = "2026-12-02") -> Any:
    found = list(DailyInvites.query(pk, DailyInvites.sk == f"DAY#{day}", consistent_read=True))
    return found[0].invites if found else None


def expired_invites(*names: str, pk: str = TEAM) -> Set[RawKey]:
    return expire("Teams", [{"pk": {"S": pk}, "sk": {"S": f"INVITE#{name}"}} for name in names])


def event(expired: Set[RawKey], model: type = Team, after: Any = None) -> Dict[str, Any]:
    """The Lambda event of every record of ``model``'s table's stream so far, the deletions ``expired`` marked as
    TTL's."""
    return lambda_event(ttl_marked(stream_records(model, after=after), expired), model)


def reasons(result: ExpiryResult) -> List[str]:
    return [skipped.reason for skipped in result.skipped]


# -- what one expiry takes off, relation by relation ----------------------------------------------------------
def test_an_expiry_takes_off_what_each_relation_counted_and_leaves_the_ignored_one() -> None:
    team()
    invite("ann", seats=3)
    invite("bob", status="accepted", seats=2)
    invite("cy", day="2026-12-03")
    assert counters() == {"invites": 3, "pending": 2, "seats": 6, "load": 3, "sent": 3, "online": 0}
    result = count_expiries(event(expired_invites("ann", "bob")), models=[Invite])
    assert result == {"batchItemFailures": []} and len(result.counted) == 2 and result.error is None
    # ann: 1 invite, pending, 3 seats; bob: 1 invite, accepted (not pending), 2 seats; "sent" keeps both
    assert counters() == {"invites": 1, "pending": 1, "seats": 1, "load": 1, "sent": 3, "online": 0}
    assert daily() == 0 and daily(day="2026-12-03") == 1  # the rollup of their day
    assert sorted((change.attribute, change.delta) for change in result.changes if change.parent is Team) == \
        sorted([("invites", -1), ("pending", -1), ("seats", -3), ("load", -1),  # ann's
                ("invites", -1), ("seats", -2), ("load", -1)])  # bob's


def test_a_child_in_a_table_with_a_hash_key_only_and_old_images_only() -> None:
    team()
    for name in ("s1", "s2"):
        Session(session_id=name, team=TEAM, expires=PAST).save()
    expired = expire("TeamSessions", [{"session_id": {"S": "s1"}}])
    result = count_expiries(event(expired, Session), models=[Session])
    assert len(result.counted) == 1 and counters()["online"] == 1


def test_records_read_with_get_records_name_their_table_with_table() -> None:
    team()
    invite("ann")
    Session(session_id="s1", team=TEAM, expires=PAST).save()
    expired = expired_invites("ann")
    records = ttl_marked(stream_records(Team), expired)  # GetRecords: no eventSourceARN
    assert count_expiries(records, models=[Invite, Session], table="Teams").counted != ()
    assert counters()["invites"] == 0 and counters()["online"] == 1


def test_get_records_records_of_models_in_several_tables_without_table_are_refused_before_anything_is_written(
        ) -> None:
    team()
    invite("ann")
    Session(session_id="s1", team=TEAM, expires=PAST).save()
    expired = expired_invites("ann") | expire("TeamSessions", [{"session_id": {"S": "s1"}}])
    invites = ttl_marked(stream_records(Team), expired)  # GetRecords: no eventSourceARN
    sessions = ttl_marked(stream_records(Session), expired)
    before = stored("Teams"), stored("TeamSessions")
    for records in (invites, sessions):
        with pytest.raises(InvalidArgumentError, match=r"\Acount_expiries\(\): the records name no table.*"
                                                       r"TeamSessions, Teams.*\n.*table="):
            count_expiries(records, models=[Invite, Session])
    assert (stored("Teams"), stored("TeamSessions")) == before  # no marker, no counter changed
    assert counters()["invites"] == 1 and counters()["online"] == 1
    assert len(count_expiries(invites, models=[Invite, Session], table="Teams").counted) == 1
    assert len(count_expiries(sessions, models=[Invite, Session], table="TeamSessions").counted) == 1
    assert counters()["invites"] == 0 and counters()["online"] == 0


# -- crossings: what the child was changed into, and how it was written ----------------------------------------
def test_an_edited_child_is_taken_off_as_it_was_last_stored() -> None:
    team()
    ann = invite("ann", seats=1)
    ann.status, ann.seats, ann.day = "accepted", 3, "2026-12-03"  # an edit: counts follow it
    ann.save()
    assert counters()["pending"] == 0 and counters()["seats"] == 3
    count_expiries(event(expired_invites("ann")), models=[Invite])
    assert counters() == {"invites": 0, "pending": 0, "seats": 0, "load": 0, "sent": 1, "online": 0}
    assert daily() == 0 and daily(day="2026-12-03") == 0


def test_a_moved_child_is_taken_off_its_new_parent() -> None:
    team()
    team("TEAM#t2")
    session = Session(session_id="s1", team=TEAM, expires=PAST)
    session.save()
    session.team = "TEAM#t2"  # a move: off t1, onto t2, in one transaction
    session.save()
    assert (counters()["online"], counters("TEAM#t2")["online"]) == (0, 1)
    expired = expire("TeamSessions", [{"session_id": {"S": "s1"}}])
    count_expiries(event(expired, Session), models=[Session])
    assert counters()["online"] == 0 and counters("TEAM#t2")["online"] == 0


def test_children_written_by_a_counted_transaction_and_by_bulk_writes_are_taken_off() -> None:
    team()
    with CountedTransaction() as transaction:
        transaction.save(Invite(pk=TEAM, sk="INVITE#ann", expires=PAST))
        transaction.save(Invite(pk=TEAM, sk="INVITE#bob", expires=PAST))
    bulk_save([Invite(pk=TEAM, sk="INVITE#cy", expires=PAST)])
    assert counters()["invites"] == 3
    result = count_expiries(event(expired_invites("ann", "bob", "cy")), models=[Invite])
    assert len(result.counted) == 3 and counters()["invites"] == 0 and daily() == 0


# -- exactly once -----------------------------------------------------------------------------------------------
def test_a_batch_delivered_again_takes_nothing_off_twice() -> None:
    team()
    for name in ("ann", "bob", "cy"):
        invite(name)
    batch = event(expired_invites("ann", "bob"))
    first = count_expiries(batch, models=[Invite])
    again = count_expiries(batch, models=[Invite])
    assert len(first.counted) == 2 and again.counted == () and again == {"batchItemFailures": []}
    assert reasons(again).count("taken off already (its marker is stored: a batch delivered again)") == 2
    assert counters()["invites"] == 1 and daily() == 1


def test_a_batch_delivered_again_is_refused_once_and_never_counted_from_its_markers() -> None:
    """The refusal returns each record's marker: it says the record was taken off, not what the child was."""
    team()
    names = [f"u{number}" for number in range(40)]
    bulk_save(Invite(pk=TEAM, sk=f"INVITE#{name}", expires=PAST) for name in names)
    batch = event(expired_invites(*names))
    count_expiries(batch, models=[Invite])
    with transact_requests(Invite) as sent:
        again = count_expiries(batch, models=[Invite])
    assert again.counted == () and again.error is None and len(sent) == 1
    assert counters()["invites"] == 0 and daily() == 0


def test_a_record_twice_in_one_batch_is_taken_off_once() -> None:
    team()
    invite("ann")
    invite("bob")
    records = event(expired_invites("ann"))["Records"]
    removal = next(record for record in records if record["eventName"] == "REMOVE")
    result = count_expiries({"Records": records + [removal]}, models=[Invite])
    assert len(result.counted) == 1 and "delivered twice in this batch" in reasons(result)
    assert counters()["invites"] == 1


def test_a_split_batch_then_the_whole_batch_again() -> None:
    """Lambda splits a failed batch (BisectBatchOnFunctionError) and retries its halves, then the whole."""
    team()
    names = [f"u{number}" for number in range(6)]
    for name in names:
        invite(name)
    records = event(expired_invites(*names))["Records"]
    removals = [record for record in records if record["eventName"] == "REMOVE"]
    count_expiries({"Records": removals[:3]}, models=[Invite])
    count_expiries({"Records": removals[2:]}, models=[Invite])
    count_expiries({"Records": records}, models=[Invite])
    assert counters()["invites"] == 0 and counters()["seats"] == 0 and daily() == 0


def test_a_replay_from_trim_horizon_after_more_writes_changes_nothing() -> None:
    team()
    for name in ("ann", "bob"):
        invite(name)
    expired = expired_invites("ann")
    count_expiries(event(expired), models=[Invite])
    invite("cy")
    invite("ann")  # the same key again: a new child
    expired |= expired_invites("ann")
    second = count_expiries(event(expired), models=[Invite])  # the whole stream again, the new expiry in it
    assert len(second.counted) == 1
    assert count_expiries(event(expired), models=[Invite]).counted == ()
    assert counters()["invites"] == 2 and daily() == 2


def test_a_crash_after_the_write_and_before_the_checkpoint_counts_once() -> None:
    """The transaction commits; the handler dies before Lambda records its checkpoint (here: the response never
    reaches it, and retrying is not allowed); Lambda delivers the same batch again."""
    team()
    for name in ("ann", "bob", "cy"):
        invite(name)
    batch = event(expired_invites("ann", "bob"))

    class Crash(BaseException):
        pass

    def crash(**_: Any) -> None:
        raise Crash("the handler's process died after DynamoDB committed")

    with hooked("after-call.dynamodb.TransactWriteItems", crash, Invite), pytest.raises(Crash):
        count_expiries(batch, models=[Invite])
    assert counters()["invites"] == 1  # it had committed
    again = count_expiries(batch, models=[Invite])
    assert again.counted == () and counters() == {"invites": 1, "pending": 1, "seats": 1, "load": 1, "sent": 3,
                                                   "online": 0}


def test_a_lost_response_retried_with_the_same_token_is_recognised_as_its_own_commit() -> None:
    """moto honours no token: the library's retry of a commit whose response was lost finds its own markers."""
    team()
    for name in ("ann", "bob"):
        invite(name)
    batch = event(expired_invites("ann"))
    lost = []

    def lose(**_: Any) -> None:
        if not lost:
            lost.append(1)
            raise ReadTimeoutError(endpoint_url="moto")  # after DynamoDB committed

    with hooked("after-call.dynamodb.TransactWriteItems", lose, Invite):
        result = count_expiries(batch, models=[Invite])
    assert lost and result.counted and result == {"batchItemFailures": []}
    assert counters()["invites"] == 1


# -- left alone ---------------------------------------------------------------------------------------------------
def test_deletes_by_anyone_else_are_left_alone() -> None:
    team()
    ann, _ = invite("ann"), invite("bob")
    ann.delete()  # the library's own delete: counted already
    expire("Teams", [{"pk": {"S": TEAM}, "sk": {"S": "INVITE#bob"}}])  # around the library, not by TTL
    result = count_expiries(event(set()), models=[Invite])
    assert result.counted == () and set(reasons(result)) == {"not a deletion by TTL"}
    assert counters()["invites"] == 1  # bob's drift is for an audit


def test_a_child_deleted_by_the_library_after_its_ttl_passed_is_counted_once() -> None:
    team()
    invite("ann").delete()  # past its TTL, before DynamoDB removed it
    result = count_expiries(event(set()), models=[Invite])
    assert result.counted == () and counters()["invites"] == 0 and daily() == 0


def test_items_never_counted_are_skipped_and_records_of_another_table_refused() -> None:
    team()
    invite("ann")
    with skip_counting(Invite):
        Invite(pk=TEAM, sk="INVITE#migrated", expires=PAST).save()
    raw_client(None).put_item(TableName="Teams", Item={"pk": {"S": TEAM}, "sk": {"S": "INVITE#raw"},
                                                       "expires": {"N": "1"}})
    expired = expired_invites("ann", "migrated", "raw")
    before = stored("Teams")
    with pytest.raises(ConfigurationError, match=r"record 0 .* is of table Teams's stream, and the models given "
                                                  r"\(Session\) are stored in TeamSessions"):
        count_expiries(event(expired), models=[Session])  # a function on another table's stream: refused
    assert stored("Teams") == before
    result = count_expiries(event(expired), models=[Invite])
    assert len(result.counted) == 1
    assert reasons(result).count("never counted (written around the library: no write id)") == 2
    assert counters()["invites"] == 0


def test_an_item_the_model_cannot_load_is_skipped_not_a_crash() -> None:
    team()
    invite("ann")
    raw_client(None).put_item(TableName="Teams", Item={"pk": {"S": TEAM}, "sk": {"S": "INVITE#odd"},
                                                       "seats": {"S": "many"}, "expires": {"N": "1"},
                                                       "_cwid": {"S": "someone-else"}})
    result = count_expiries(event(expired_invites("odd", "ann")), models=[Invite])
    assert len(result.counted) == 1 and "not a counted child of the models given" in reasons(result)
    assert counters()["invites"] == 0


# -- merged, chunked, failing -------------------------------------------------------------------------------------
def test_many_expiries_of_one_parent_become_one_transaction_with_one_add_per_parent_item() -> None:
    team()
    names = [f"u{number}" for number in range(30)]
    for name in names:
        invite(name)
    batch = event(expired_invites(*names))
    sent: List[Dict[str, Any]] = []

    def record(params: Dict[str, Any], **_: Any) -> None:
        sent.append(params)

    with hooked("before-parameter-build.dynamodb.TransactWriteItems", record, Invite):
        result = count_expiries(batch, models=[Invite])
    assert len(result.counted) == 30 and len(sent) == 1
    updates = [item["Update"] for item in sent[0]["TransactItems"] if "Update" in item]
    puts = [item["Put"] for item in sent[0]["TransactItems"] if "Put" in item]
    assert len(puts) == 30 and all(MARKER in put["Item"] for put in puts)
    # each marker is a transactional write of 2 WCU (items up to 1 KB): docs/expiring.rst's cost per expiry
    assert all(write_units(item_bytes(put["Item"]), transactional=True) == 2 for put in puts)
    keys = [tuple(sorted((name, str(value)) for name, value in update["Key"].items())) for update in updates]
    assert len(keys) == len(set(keys)) <= 1 + 4 + 1  # the team, its shard items, the day's rollup
    assert counters() == {"invites": 0, "pending": 0, "seats": 0, "load": 0, "sent": 30, "online": 0}


@pytest.mark.slow
def test_a_batch_past_one_transaction_goes_in_several_in_stream_order() -> None:
    names = [f"u{number}" for number in range(150)]
    team()
    bulk_save(Invite(pk=TEAM, sk=f"INVITE#{name}", expires=PAST) for name in names)
    batch = event(expired_invites(*names))
    with transact_requests(Invite) as sent:
        result = count_expiries(batch, models=[Invite])
    assert len(result.counted) == 150 and len(sent) == 2 and counters()["invites"] == 0


@pytest.mark.slow
def test_a_failure_answers_from_the_first_record_not_applied_and_none_is_half_applied() -> None:
    names = [f"u{number}" for number in range(150)]
    team()
    bulk_save(Invite(pk=TEAM, sk=f"INVITE#{name}", expires=PAST) for name in names)
    batch = event(expired_invites(*names))
    calls: List[int] = []

    def refuse_second(**_: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("no second transaction")

    with hooked("before-call.dynamodb.TransactWriteItems", refuse_second, Invite), pytest.raises(ValueError):
        count_expiries(batch, models=[Invite])
    applied = 150 - counters()["invites"]
    assert 0 < applied < 150 and 150 - counters()["seats"] == applied
    assert len(stored_markers()) == applied  # every applied record whole (marker and counts), none after


def test_a_refused_transaction_answers_with_batch_item_failures() -> None:
    team("TEAM#t2")
    invite("ann", pk="TEAM#t2")
    team()
    invite("bob")
    raw_client(None).update_item(TableName="Teams", Key={"pk": {"S": TEAM}, "sk": {"S": "META"}},
                                 UpdateExpression="SET invites = :zero",
                                 ExpressionAttributeValues={":zero": {"N": "0"}})  # drifted: bob's expiry underflows
    batch = event(expired_invites("ann", pk="TEAM#t2") | expired_invites("bob"))
    result = count_expiries(batch, models=[Invite])
    removals = [record for record in batch["Records"] if record["eventName"] == "REMOVE"]
    assert result == {"batchItemFailures": [{"itemIdentifier": removals[0]["dynamodb"]["SequenceNumber"]}]}
    assert result.error is not None and "below zero" in str(result.error)
    assert counters("TEAM#t2")["invites"] == 1 and stored_markers() == []  # nothing of the batch was written


def test_a_record_whose_expiry_cannot_be_computed_stops_the_batch_there() -> None:
    """A stored value the relation cannot count (1.5 seats, written around the library): the records before it
    are applied, the batch answers from it, and none after it is applied."""
    team()
    for name in ("ann", "bob", "cy"):
        invite(name)
    raw_client(None).update_item(TableName="Teams", Key={"pk": {"S": TEAM}, "sk": {"S": "INVITE#bob"}},
                                 UpdateExpression="SET seats = :half",
                                 ExpressionAttributeValues={":half": {"N": "1.5"}})
    batch = event(expired_invites("ann", "bob", "cy"))
    result = count_expiries(batch, models=[Invite])
    removals = [record for record in batch["Records"] if record["eventName"] == "REMOVE"]
    assert result == {"batchItemFailures": [{"itemIdentifier": removals[1]["dynamodb"]["SequenceNumber"]}]}
    assert isinstance(result.error, ChildValueError) and len(result.counted) == 1
    assert counters()["invites"] == 2 and len(stored_markers()) == 1


def test_an_expiry_whose_parent_is_gone_writes_its_marker_and_leaves_the_parent_out() -> None:
    team()
    invite("ann")
    Team.get(TEAM, "META").delete()  # with its shard items
    result = count_expiries(event(expired_invites("ann")), models=[Invite])
    assert result == {"batchItemFailures": []} and len(result.counted) == 1
    assert {(change.parent, change.attribute) for change in result.gone} == \
        {(Team, name) for name in ("invites", "pending", "seats", "load")}
    assert len(stored_markers()) == 1 and daily() == 0
    assert not [item for item in stored("Teams") if item["sk"]["S"] == "META"]  # never created again
    assert count_expiries(event(expired_invites("ann")), models=[Invite]).counted == ()


def stored_markers() -> List[Dict[str, Any]]:
    return [item for item in stored("Teams") if MARKER in item]


# -- markers --------------------------------------------------------------------------------------------------
def test_a_marker_expires_itself_after_two_days_and_its_own_removal_is_skipped() -> None:
    team()
    invite("ann")
    count_expiries(event(expired_invites("ann")), models=[Invite])
    (marker,) = stored_markers()
    assert marker["sk"] == {"S": MARKER} and marker["pk"]["S"].startswith(f"{MARKER}#")
    assert abs(int(marker["expires"]["N"]) - (time.time() + MARKER_LIFETIME)) < 600
    markers = Invite.pk.startswith(f"{MARKER}#")
    assert len(list(Invite.scan(markers, consistent_read=True))) == 1  # PynamoDB would load it as an Invite
    assert list(Invite.scan(markers & not_a_marker(), consistent_read=True)) == []
    expired = expire("Teams", [{"pk": marker["pk"], "sk": marker["sk"]}])
    result = count_expiries(event(expired), models=[Invite])
    assert "an expiry marker of the library" in reasons(result) and counters()["invites"] == 0


def test_an_audit_after_expiries_finds_no_drift() -> None:
    team()
    for name in ("ann", "bob", "cy"):
        invite(name)
    count_expiries(event(expired_invites("ann", "bob")), models=[Invite])
    for counter in (Team.invites, Team.pending, Team.seats, Team.load):
        report = audit(counter)
        assert not report.drifts and report.parents_checked == 1, counter
    (drift,) = audit(Team.sent).drifts  # its expiries knowingly not taken off
    assert (drift.stored, drift.actual) == (3, 1)


def test_signals_child_removed_on_an_expiry_and_duplicate_rejected_on_a_record_again() -> None:
    team()
    invite("ann")
    batch = event(expired_invites("ann"))
    removed: List[Any] = []
    duplicates: List[Any] = []

    def on_removed(sender: Any, **kwargs: Any) -> None:
        removed.append(kwargs["instance"].sk)

    def on_duplicate(sender: Any, **kwargs: Any) -> None:
        duplicates.append(kwargs["instance"].sk)

    child_removed.connect(on_removed)
    duplicate_rejected.connect(on_duplicate)
    try:
        count_expiries(batch, models=[Invite])
        count_expiries(batch, models=[Invite])
    finally:
        child_removed.disconnect(on_removed)
        duplicate_rejected.disconnect(on_duplicate)
    assert removed == ["INVITE#ann"] and duplicates == ["INVITE#ann"]


# -- bad input: a clear error, nothing written --------------------------------------------------------------------
@pytest.mark.parametrize("given", [None, {"Records": "x"}, [{"eventName": "REMOVE"}], "event"])
def test_what_is_not_a_stream_event_is_refused(given: Any) -> None:
    team()
    before = stored("Teams")
    with pytest.raises(InvalidArgumentError, match="stream (event|record)"):
        count_expiries(given, models=[Invite])
    assert stored("Teams") == before


@pytest.mark.parametrize("models, message", [(Invite, "a list of models"), ([], "at least one"),
                                             ([Team], "not a counted child"), (["Invite"], "not a counted child")])
def test_models_that_cannot_count_expiries_are_refused(models: Any, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        count_expiries({"Records": []}, models=models)


def test_a_deletion_by_ttl_without_its_old_image_is_refused_before_anything_is_written() -> None:
    team()
    invite("ann")
    invite("bob")
    batch = event(expired_invites("ann", "bob"))
    removals = [record for record in batch["Records"] if record["eventName"] == "REMOVE"]
    del removals[1]["dynamodb"]["OldImage"]
    removals[1]["dynamodb"]["StreamViewType"] = "KEYS_ONLY"
    with pytest.raises(ConfigurationError, match="NEW_AND_OLD_IMAGES or OLD_IMAGE"):
        count_expiries(batch, models=[Invite])
    assert stored_markers() == [] and counters()["invites"] == 2


# -- declaring ------------------------------------------------------------------------------------------------------
def guest_model(*, ttl: bool = True, hash_key: type = UnicodeAttribute, **options: Any) -> Any:
    """A child model declared here: a guest of a room, expiring by TTL unless ``ttl`` is false."""
    room = type("Room", (CounterMixin, Model), {
        "Meta": type("Meta", (), {"table_name": "Rooms", "region": "us-east-1"}),
        "pk": UnicodeAttribute(hash_key=True), "guests": CounterField()})
    body = {"Meta": type("Meta", (), {"table_name": "Guests", "region": "us-east-1"}),
            "pk": hash_key(hash_key=True), "room": UnicodeAttribute(),
            "stay": counted_by(room.guests, key=lambda guest: guest.room, **options)}
    if ttl:
        body["expires"] = TTLAttribute(null=True)
    return type("Guest", (CounterMixin, Model), body)


@pytest.mark.parametrize("ttl, hash_key, options, message", [
    (True, UnicodeAttribute, {}, "DynamoDB deletes expired Guest items by itself.*expiries='stream'.*"
                                 "expiries='ignored'"),
    (False, UnicodeAttribute, {"expiries": "stream"}, "Guest has no TTLAttribute.*leave expiries= out"),
    (True, UnicodeAttribute, {"expiries": "always"}, "not 'always'"),
    (True, NumberAttribute, {"expiries": "stream"}, "Guest's hash key to be a string attribute"),
])
def test_a_declaration_whose_counters_would_drift_on_expiry_is_refused(ttl: bool, hash_key: type,
                                                                       options: Dict[str, Any], message: str) -> None:
    with refused(message):
        guest_model(ttl=ttl, hash_key=hash_key, **options)


def test_expiries_ignored_is_accepted_and_counts_nothing_off() -> None:
    Guest = guest_model(expiries="ignored")  # noqa: N806 - a model class
    assert Guest.stay.expiries == "ignored" and Invite.team.expiries == "stream"
    with pytest.raises(InvalidArgumentError, match="expiries='stream'"):
        count_expiries({"Records": []}, models=[Guest])



def lodge(table: str) -> Any:
    """A parent model of its own, in ``table``, whose stream holds old images."""
    meta = type("Meta", (), {"table_name": table, "region": "us-east-1",
                             "stream_view_type": STREAM_NEW_AND_OLD_IMAGE})
    return type("Lodge", (CounterMixin, Model), {"Meta": meta, "pk": UnicodeAttribute(hash_key=True),
                                                 "sk": UnicodeAttribute(range_key=True), "guests": CounterField()})


def test_a_subclass_that_expires_under_an_inherited_relation_is_refused_until_its_base_has_the_ttl() -> None:
    Lodge = lodge("Lodges")  # noqa: N806 - a model class

    class Guest(CounterMixin, Model):
        class Meta:
            table_name = "Lodges"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        stay = counted_by(Lodge.guests, key=lambda guest: (guest.pk, "META"), prefix="GUEST#")

    with refused(r"\ADayGuest inherits Guest.stay = counted_by\(\.\.\.\) without expiries=, and DayGuest.expires "
                 r"is a TTLAttribute\n.*expired DayGuest items.*Lodge.guests would stay high.*"
                 r"Declare the TTLAttribute on Guest"):
        class DayGuest(Guest):
            expires = TTLAttribute(null=True)

    class Visitor(CounterMixin, Model):  # declared as the error says: the TTL on the base, with expiries=
        class Meta:
            table_name = "Lodges"
            region = "us-east-1"
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        expires = TTLAttribute(null=True)
        stay = counted_by(Lodge.guests, key=lambda guest: (guest.pk, "META"), prefix="VISITOR#",
                          expiries="stream")

    class DayVisitor(Visitor):
        day = UnicodeAttribute(default="2026-12-02")

    Lodge.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    Lodge(pk="L1", sk="META").save()
    DayVisitor(pk="L1", sk="VISITOR#ann", expires=PAST).save()
    assert Lodge.get("L1", "META", consistent_read=True).guests == 1
    expired = expire("Lodges", [{"pk": {"S": "L1"}, "sk": {"S": "VISITOR#ann"}}])
    assert len(count_expiries(event(expired, Lodge), models=[DayVisitor]).counted) == 1
    assert Lodge.get("L1", "META", consistent_read=True).guests == 0


def test_a_child_attribute_stored_under_the_marker_name_is_refused_so_no_expiry_passes_for_a_marker() -> None:
    Lodge = lodge("MarkedLodges")  # noqa: N806 - a model class
    team()
    before = stored("Teams")
    with refused(rf"\AOdd.origin is stored as '{MARKER}', a name pynamodb-counters stores on items itself\n"
                 r".*another attr_name"):
        class Odd(CounterMixin, Model):
            class Meta:
                table_name = "MarkedLodges"
                region = "us-east-1"

            pk = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)
            origin = UnicodeAttribute(attr_name=MARKER, null=True)
            expires = TTLAttribute(null=True)
            stay = counted_by(Lodge.guests, key=lambda odd: (odd.pk, "META"), prefix="ODD#", expiries="stream")

    assert feeders_of(Lodge.guests) == () and stored("Teams") == before
