"""Issue 19, newcomer 1: the feeder record (``_cfeed``) names each relation by what survives a refactor (the data
it counts, or an explicit ``feeder=``), entries of the former ``module:Class.relation`` format are still
recognised, and ``migrate_feeders()`` (the command's ``feeders``) rewrites or forgets recorded entries in bulk,
live.

Renamed modules are real modules written to ``tmp_path`` (the ``app`` fixture of ``test_safety_reconcile``); models
declared in ``__main__`` are the same source run with another ``__name__``.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from pynamodb_counters import audit, repair, skip_counting
from pynamodb_counters.exceptions import ConfigurationError
from tests.factories import post, raw_client, snapshot
from tests.models import Bookmark, Like, Post, User, Video, View
from tests.test_safety_reconcile import MODELS, app, forget_app, raw_item, run, write_app  # noqa: F401

pytestmark = pytest.mark.usefixtures("dynamodb")

META = {"pk": {"S": "P1"}, "sk": {"S": "META"}}


def feeds(table: str, key: Dict[str, Any]) -> Any:
    """The feeder entries an item records, as a set (empty when it records none)."""
    return set(raw_item(table, key).get("_cfeed", {}).get("SS", []))


def social(pk: str = "POST#a91f") -> Dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "META"}}


# -- what a counted write records -------------------------------------------------------------------------------
def test_a_counted_write_records_its_feeder_by_the_data_it_counts_never_by_module() -> None:
    post()
    Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    Bookmark(pk="POST#a91f", sk="BOOKMARK#USER#U1", user_id="U1").save() if User(user_id="U1").save() else None
    assert feeds("Social", social()) == {"like_tally<prefix=LIKE#", "bookmarkCount<prefix=BOOKMARK#"}
    assert feeds("Users", {"user_id": {"S": "U1"}}) == {"bookmarks<table=Social;relation=Bookmark.owner"}
    assert Like.post.feed == "like_tally<prefix=LIKE#" and Bookmark.owner.feed == \
        "bookmarks<table=Social;relation=Bookmark.owner"
    Video(pk="VIDEO#v1", sk="META").save()
    View(pk="VIDEO#v1", sk="VIEW#USER#1").save()
    assert View.video.feed == "view_count<prefix=VIEW#"


FACTORY = '''
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


def build(table):
    class Post(CounterMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        like_tally = CounterField()
        comment_count = CounterField()

        @classmethod
        def audit_filter(cls):
            return cls.sk == "META"

    class Like(CounterMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")

    class Comment(CounterMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)  # COMMENT#c1: its own partition
        sk = UnicodeAttribute(range_key=True)
        post_id = UnicodeAttribute()
        post = counted_by(Post.comment_count, key=lambda c: (c.post_id, "META"),
                          children=lambda key: sum(1 for c in Comment.scan(Comment.post_id == key[0],
                                                                            consistent_read=True)))

    return Post, Like, Comment
'''


def factory_models(module_name: str) -> Tuple[Any, Any, Any]:
    """The models of :data:`FACTORY`, built by its factory function in a module named ``module_name``: what a
    process running the app as ``__main__``, or after a module was renamed, declares."""
    namespace: Dict[str, Any] = {"__name__": module_name}
    exec(compile(textwrap.dedent(FACTORY), f"<{module_name}>", "exec"), namespace)
    built: Tuple[Any, Any, Any] = namespace["build"]("Feeders")
    return built


def test_models_built_by_a_factory_in_main_are_auditable_by_a_process_that_imports_them() -> None:
    writer_post, writer_like, writer_comment = factory_models("__main__")  # the app, run as a script
    writer_post.create_table(billing_mode="PAY_PER_REQUEST")
    writer_post(pk="P1", sk="META").save()
    for n in range(3):
        writer_like(pk="P1", sk=f"LIKE#{n}").save()
    writer_comment(pk="COMMENT#c1", sk="COMMENT", post_id="P1").save()
    with skip_counting():
        writer_like(pk="P1", sk="LIKE#9").save()  # drift: 4 likes, counter 3
    auditor_post, _, _ = factory_models("myapp.models")  # the command, importing the app's module
    report = audit(auditor_post.like_tally)
    assert report.unverifiable == ()
    assert [(d.key, d.stored, d.actual) for d in report.drifts] == [(("P1", "META"), 3, 4)]
    assert [r.status for r in repair(report.drifts).repairs] == ["repaired"]
    assert audit(auditor_post.comment_count).unverifiable == () and audit(auditor_post.comment_count).drifts == ()


def test_a_parent_written_before_its_module_was_renamed_stays_auditable(
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    write_app(app, posts=MODELS)
    from app.posts import Like as OldLike  # type: ignore[import-not-found]
    from app.posts import Post as OldPost

    OldPost.create_table(billing_mode="PAY_PER_REQUEST")
    OldPost(pk="P1", sk="META").save()
    OldLike(pk="P1", sk="LIKE#1").save()
    forget_app()
    write_app(app, blog=MODELS)  # app/posts.py renamed app/blog.py
    (app / "posts.py").unlink()
    code, out, err = run(capsys, "audit", "app.blog:Post.like_tally")
    assert code == 0 and "1 parent checked, 0 drifted" in out and err == ""


def add_entries(table: str, key: Dict[str, Any], *entries: str) -> None:
    """Record feeder entries behind the library's back, as an earlier release (or another program) did."""
    raw_client(None).update_item(TableName=table, Key=key, UpdateExpression="ADD #f :e",
                                 ExpressionAttributeNames={"#f": "_cfeed"},
                                 ExpressionAttributeValues={":e": {"SS": list(entries)}})


def test_an_entry_in_the_former_module_format_is_recognised_as_its_loaded_relation() -> None:
    post()
    with skip_counting():
        Like(pk="POST#a91f", sk="LIKE#USER#1", liked_at=1).save()
    add_entries("Social", social(), "like_tally<tests.models:Like.post")  # what 0.1.0 before issue 19 recorded
    [drift] = audit(Post.like_tally).drifts
    assert audit(Post.like_tally).unverifiable == () and (drift.stored, drift.actual) == (0, 1)
    add_entries("Social", social(), "like_tally<gone.models:Like.post")  # a module no longer loaded
    [unverifiable] = audit(Post.like_tally).unverifiable
    assert unverifiable.unloaded == ("gone.models:Like.post",)


def test_relations_of_one_counter_that_would_share_a_feeder_id_are_refused_and_feeder_names_them_apart() -> None:
    from pynamodb.attributes import UnicodeAttribute
    from pynamodb.models import Model

    from pynamodb_counters import CounterField, CounterMixin, counted_by

    def box_fed_by(*feeders: Any) -> Tuple[Any, list]:
        class Box(CounterMixin, Model):
            class Meta:
                table_name = "Boxes"  # a table of its own: the suite's Scans of Users stay unshared
                region = "us-east-1"
            user_id = UnicodeAttribute(hash_key=True)
            items = CounterField()

        items = []
        for n, feeder in enumerate(feeders):
            class Item(CounterMixin, Model):  # one class name in two modules of an app, say
                class Meta:
                    table_name = "Boxes"
                    region = "us-east-1"
                user_id = UnicodeAttribute(hash_key=True)
                box_id = UnicodeAttribute()
                box = counted_by(Box.items, key=lambda i: i.box_id, children=lambda key: 0, feeder=feeder)
            Item.__module__ = f"app.module{n}"
            items.append(Item)
        return Box, items

    box, _ = box_fed_by(None, None)
    box.create_table(billing_mode="PAY_PER_REQUEST")
    before = snapshot()
    with pytest.raises(ConfigurationError, match=r"both feed .*Box.items.*feeder id 'relation=Item.box'.*feeder="):
        audit(box.items, parents=["B1"])
    assert snapshot() == before
    box, (first, named) = box_fed_by(None, "boxed-items")
    assert (first.box.feed, named.box.feed) == ("items<relation=Item.box", "items<name=boxed-items")
    assert audit(box.items, parents=["B1"]).missing == (("B1",),)


@pytest.mark.parametrize("feeder", ["", " padded", "x" * 101, 7])
def test_a_feeder_name_that_is_not_a_short_stable_string_is_refused_at_declaration(feeder: Any) -> None:
    from pynamodb_counters import counted_by

    with pytest.raises(ConfigurationError, match="feeder=.*short stable name"):
        counted_by(Post.like_tally, key=lambda c: (c.pk, "META"), feeder=feeder)


# -- migrating and forgetting recorded feeders ------------------------------------------------------------------
GONE = "gone.models:Reaction.post"


def seed_records() -> None:
    """Three posts: P1 written by an earlier release (a legacy entry) and since by this one, P2 also fed by a
    relation removed from the code, P3 current only. Each post's counter is exact."""
    for pk in ("P1", "P2", "P3"):
        post(pk)
        Like(pk=pk, sk="LIKE#USER#1", liked_at=1).save()
    add_entries("Social", social("P1"), "like_tally<tests.models:Like.post", "bookmarkCount<tests.models:Bookmark.post")
    add_entries("Social", social("P2"), f"like_tally<{GONE}")


def test_migrate_feeders_lists_what_is_recorded_and_a_dry_run_writes_nothing() -> None:
    from pynamodb_counters import migrate_feeders

    seed_records()
    before = snapshot()
    report = migrate_feeders(Post.like_tally, migrate=True, forget=[GONE])
    assert snapshot() == before and not report.applied and report.parents_checked == 3
    assert [(e.feeder, e.status, e.relation, e.parents) for e in report.entries] == [
        ("prefix=LIKE#", "current", "Like.post", 3), ("tests.models:Like.post", "legacy", "Like.post", 1),
        (GONE, "unknown", None, 1)]
    assert [(c.key, c.shard, c.added, c.removed, c.status) for c in report.changes] == [
        (("P1", "META"), 0, (), ("like_tally<tests.models:Like.post",), "planned"),  # its current id is there
        (("P2", "META"), 0, (), (f"like_tally<{GONE}",), "planned")]
    assert [u.key for u in audit(Post.like_tally).unverifiable] == [("P2", "META")]


def test_migrate_feeders_applied_rewrites_legacy_ids_forgets_the_named_ones_and_leaves_other_counters() -> None:
    from pynamodb_counters import migrate_feeders

    seed_records()
    with skip_counting():
        Like(pk="P1", sk="LIKE#USER#9", liked_at=1).save()  # drift, for the audit after
    raw_client(None).update_item(TableName="Social", Key=social("P1"), UpdateExpression="DELETE #f :e",
                                 ExpressionAttributeNames={"#f": "_cfeed"},
                                 ExpressionAttributeValues={":e": {"SS": ["like_tally<prefix=LIKE#"]}})
    report = migrate_feeders(Post.like_tally, migrate=True, forget=[f"like_tally<{GONE}"], dry_run=False)
    assert report.applied and [(c.key, c.added, c.removed, c.status) for c in report.changes] == [
        (("P1", "META"), ("like_tally<prefix=LIKE#",), ("like_tally<tests.models:Like.post",), "changed"),
        (("P2", "META"), (), (f"like_tally<{GONE}",), "changed")]
    assert feeds("Social", social("P1")) == {"like_tally<prefix=LIKE#", "bookmarkCount<tests.models:Bookmark.post"}
    assert feeds("Social", social("P2")) == feeds("Social", social("P3")) == {"like_tally<prefix=LIKE#"}
    audited = audit(Post.like_tally)
    assert audited.unverifiable == () and [(d.key, d.actual) for d in audited.drifts] == [(("P1", "META"), 2)]
    again = migrate_feeders(Post.like_tally, migrate=True, forget=[GONE], dry_run=False)
    assert again.changes == () and [e.status for e in again.entries] == ["current"]


def test_a_counted_write_between_the_add_and_the_delete_of_a_migration_is_kept_and_the_parent_stays_verifiable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pynamodb_counters import migrate_feeders

    post("P1")
    with skip_counting():
        Like(pk="P1", sk="LIKE#USER#1", liked_at=1).save()
    raw_client(None).update_item(TableName="Social", Key=social("P1"), UpdateExpression="SET like_tally = :one",
                                 ExpressionAttributeValues={":one": {"N": "1"}})
    add_entries("Social", social("P1"), "like_tally<tests.models:Like.post")  # an earlier release's only record
    connection = Post._get_connection()
    update_item = connection.update_item
    seen: list = []

    def between(*args: Any, **kwargs: Any) -> Any:
        done = update_item(*args, **kwargs)
        if not seen:  # after the first request of the rewrite, before the second
            seen.append(feeds("Social", social("P1")))
            Like(pk="P1", sk="LIKE#USER#2", liked_at=1).save()  # a like landing mid-migration
        return done

    monkeypatch.setattr(connection, "update_item", between)
    [change] = migrate_feeders(Post.like_tally, migrate=True, dry_run=False).changes
    assert change.status == "changed"
    assert seen == [{"like_tally<prefix=LIKE#", "like_tally<tests.models:Like.post"}]  # never without a record
    assert feeds("Social", social("P1")) == {"like_tally<prefix=LIKE#"}
    report = audit(Post.like_tally)
    assert report.unverifiable == () and report.drifts == () and Post.get("P1", "META").like_tally == 2


def test_forgetting_a_loaded_relations_id_is_refused_and_writes_nothing() -> None:
    from pynamodb_counters import migrate_feeders
    from pynamodb_counters.exceptions import InvalidArgumentError

    seed_records()
    before = snapshot()
    with pytest.raises(InvalidArgumentError, match=r"'prefix=LIKE#'.*Like.post, which is loaded.*Nothing was written"):
        migrate_feeders(Post.like_tally, forget=["prefix=LIKE#"], dry_run=False)
    with pytest.raises(InvalidArgumentError, match=r"legacy id of Like.post.*migrate=True"):
        migrate_feeders(Post.like_tally, forget=["like_tally<tests.models:Like.post"], dry_run=False)
    with pytest.raises(InvalidArgumentError, match="limit"):
        migrate_feeders(Post.like_tally, limit=-1)
    assert snapshot() == before


def test_migrate_feeders_rewrites_the_records_on_a_sharded_counters_shard_items() -> None:
    from pynamodb_counters import migrate_feeders

    Video(pk="VIDEO#v1", sk="META").save()
    for n in range(6):
        View(pk="VIDEO#v1", sk=f"VIEW#USER#{n}").save()
    shards = [item for item in raw_client(None).scan(TableName="Videos", ConsistentRead=True)["Items"]
              if "_cfeed" in item]
    for item in shards:
        key = {"pk": item["pk"], "sk": item["sk"]}
        raw_client(None).update_item(TableName="Videos", Key=key, UpdateExpression="DELETE #f :e",
                                     ExpressionAttributeNames={"#f": "_cfeed"},
                                     ExpressionAttributeValues={":e": {"SS": ["view_count<prefix=VIEW#"]}})
        add_entries("Videos", key, "view_count<tests.models:View.video")
    report = migrate_feeders(Video.view_count, parents=[("VIDEO#v1", "META")], migrate=True, dry_run=False)
    assert len(report.changes) == len(shards) > 1 and {c.status for c in report.changes} == {"changed"}
    assert all(feeds("Videos", {"pk": i["pk"], "sk": i["sk"]}) == {"view_count<prefix=VIEW#"} for i in shards)
    assert audit(Video.view_count).drifts == () and audit(Video.view_count).unverifiable == ()


def test_the_feeders_command_lists_then_applies_and_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    seed_records()
    before = snapshot()
    code, out, err = run(capsys, "feeders", "tests.models:Post.like_tally", "--migrate", "--forget", GONE)
    assert code == 0 and err == "" and snapshot() == before
    assert out.splitlines() == [
        "Post.like_tally: 3 parents checked",
        "  current  prefix=LIKE# (Like.post): 3 parents",
        "  legacy   tests.models:Like.post (Like.post): 1 parent",
        f"  unknown  {GONE}: 1 parent",
        'Post ["P1", "META"]: planned - like_tally<tests.models:Like.post',
        f'Post ["P2", "META"]: planned - like_tally<{GONE}',
        "2 items to rewrite; dry run, nothing written (use --apply)"]
    code, out, err = run(capsys, "feeders", "tests.models:Post.like_tally", "--migrate", "--forget", GONE, "--apply",
                         "--json")
    report = json.loads(out)
    assert code == 0 and report["applied"] is True and [c["status"] for c in report["changes"]] == ["changed"] * 2
    assert report["changes"][1] == {"model": "Post", "key": ["P2", "META"], "shard": 0, "added": [],
                                    "removed": [f"like_tally<{GONE}"], "status": "changed"}
    code, out, _ = run(capsys, "feeders", "tests.models:Like.post", "--parent", '["P2", "META"]')
    assert code == 0 and out.splitlines()[1:] == ["  current  prefix=LIKE# (Like.post): 1 parent",
                                                  "0 items to rewrite"]
    code, out, err = run(capsys, "feeders", "tests.models:Post.like_tally", "--forget", "prefix=LIKE#", "--apply")
    assert code == 2 and out == "" and "which is loaded" in err and len(err.strip().splitlines()) == 1
