"""The feeder record (``_cfeed``): every counted write records, on the parent item (or the shard item) it counts on,
the relations that fed its counters, and an audit or repair never acts on a counter fed by a relation that is not
loaded (issue 10, case 1). Issue 19, newcomer 1: each relation is recorded by what survives a refactor (the data it
counts, or an explicit ``feeder=``), entries of the former ``module:Class.relation`` format are still recognised,
and ``migrate_feeders()`` (the command's ``feeders``) rewrites or forgets recorded entries in bulk, live.

The app's modules are real modules written to ``tmp_path`` (the ``app`` fixture, from ``tests/support/apps/``): two of
them feed one counter (``app.posts`` and ``app.reactions``), imported both to write, then forgotten (as a fresh process
would) before the command runs with ``app.posts`` alone; a renamed module is the same file under another name.
Models declared in ``__main__`` are the same source run with another ``__name__``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import (
    CounterField,
    CounterMixin,
    Drift,
    audit,
    bulk_save,
    counted_by,
    repair,
    set_counter,
    skip_counting,
)
from pynamodb_counters.declare._spec import feeders_of
from pynamodb_counters.exceptions import ConfigurationError
from tests.support.app_package import forget_app, run, source, write_app
from tests.support.factories import post, raw_client, raw_item, raw_update, snapshot, stored
from tests.support.models import Bookmark, Like, Post, User, Video, View
from tests.test_declarations import refused

pytestmark = pytest.mark.usefixtures("dynamodb")

P1 = {"pk": {"S": "P1"}, "sk": {"S": "META"}}


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
    assert Like.post.feeder_entry == "like_tally<prefix=LIKE#" and Bookmark.owner.feeder_entry == \
        "bookmarks<table=Social;relation=Bookmark.owner"
    Video(pk="VIDEO#v1", sk="META").save()
    View(pk="VIDEO#v1", sk="VIEW#USER#1").save()
    assert View.video.feeder_entry == "view_count<prefix=VIEW#"


def test_counted_writes_record_their_feeders_and_parent_saves_keep_them() -> None:
    key = post("POST#rec")
    Like(pk="POST#rec", sk="LIKE#USER#1", liked_at=1).save()
    bulk_save([Like(pk="POST#bulk", sk="LIKE#USER#1", liked_at=1)] if post("POST#bulk") else [])
    for pk in ("POST#rec", "POST#bulk"):
        item = raw_item("Social", {"pk": {"S": pk}, "sk": {"S": "META"}})
        assert item["_cfeed"] == {"SS": ["like_tally<prefix=LIKE#"]}
    loaded = Post.get(*key)
    loaded.title = "Edited"
    loaded.save()  # a parent save SETs its declared attributes only
    item = raw_item("Social", {"pk": {"S": "POST#rec"}, "sk": {"S": "META"}})
    assert item["_cfeed"] == {"SS": ["like_tally<prefix=LIKE#"]} and item["title"] == {"S": "Edited"}
    assert Post.get(*key).like_tally == 1 and "_cfeed" not in Post.get(*key).attribute_values
    assert audit(Post.like_tally, parents=[key]).unverifiable == ()


def test_a_sharded_counter_records_feeders_on_its_shard_items_and_audits_read_them_all() -> None:
    Video(pk="VIDEO#v1", sk="META").save()
    views = [View(pk="VIDEO#v1", sk=f"VIEW#USER#{n}") for n in range(8)]
    for view in views:
        view.save()
    items = [item for item in stored("Videos") if item["pk"]["S"].startswith("VIDEO#v1") and "_cfeed" in item]
    assert items and all(item["_cfeed"] == {"SS": ["view_count<prefix=VIEW#"]} for item in items)
    shard = next(item for item in items if "_cshard" in item)  # a shard item, not the parent
    raw_update("Videos", {"pk": shard["pk"], "sk": shard["sk"]}, "ADD _cfeed :n",
               {":n": {"SS": ["view_count<gone.models:Boost.video"]}})
    report = audit(Video.view_count, parents=[("VIDEO#v1", "META")])
    assert report.drifts == ()
    assert [u.unloaded for u in report.unverifiable] == [("gone.models:Boost.video",)]
    assert audit(Video.report_count, parents=[("VIDEO#v1", "META")]).unverifiable == ()  # another counter's


# -- an audit or a repair never acts on a counter fed by a relation that is not loaded ------------------------------
def seed_blog(app: Path) -> None:
    """P1 with 3 likes and 2 reactions (exact: 5), P2 with 1 like, written by a process that loaded both
    modules: each counted write records the relation that fed the counter (P2: Like.post only)."""
    write_app(app, posts=source("blog_models"), reactions=source("reaction_models"))
    from app.posts import Like as AppLike  # type: ignore[import-not-found]
    from app.posts import Post as AppPost
    from app.reactions import Reaction  # type: ignore[import-not-found]

    AppPost.create_table(billing_mode="PAY_PER_REQUEST")
    AppPost(pk="P1", sk="META").save()
    AppPost(pk="P2", sk="META").save()
    for n in range(3):
        AppLike(pk="P1", sk=f"LIKE#{n}").save()
    for n in range(2):
        Reaction(pk="P1", sk=f"REACTION#{n}").save()
    AppLike(pk="P2", sk="LIKE#0").save()
    assert AppPost.get("P1", "META").like_tally == 5
    forget_app()


def blog_items() -> List[Dict[str, Any]]:
    return sorted(stored("Blog"), key=repr)


def test_repair_refuses_a_counter_fed_by_a_relation_that_is_not_loaded(
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_blog(app)
    before = blog_items()
    code, out, err = run(capsys, "repair", "app.posts:Post.like_tally", "--apply")
    assert "repaired 5 -> 3" not in out
    assert 'Post ["P1", "META"] like_tally: unverifiable: fed by prefix=REACTION#, which is not ' \
           'loaded' in out
    assert code == 2 and "--import" in err and len(err.strip().splitlines()) == 1
    assert blog_items() == before  # nothing written
    assert raw_item("Blog", P1)["like_tally"] == {"N": "5"}
    code, out, err = run(capsys, "audit", "app.posts:Post.like_tally", "--json")
    report = json.loads(out)
    assert code == 2 and report["drifted"] == 0 and report["unverifiable"] == [
        {"model": "Post", "key": [pk, "META"], "attribute": "like_tally",
         "unloaded": ["prefix=REACTION#"],
         "reason": "unverifiable: fed by prefix=REACTION#, which is not loaded"} for pk in ("P1",)]
    assert err.strip().splitlines() == [
        "pynamodb-counters: 1 parent unverifiable: fed by prefix=REACTION#, not loaded; load the modules "
        "declaring them with --import MODULE (entries of relations removed from the code: pynamodb-counters "
        "feeders --forget)"]
    code, out, err = run(capsys, "audit", "app.posts:Post.like_tally", "--import", "app.reactions")
    assert code == 0 and "2 parents checked, 0 drifted" in out and err == ""


def test_the_python_api_refuses_a_counter_fed_by_a_relation_that_is_not_loaded_and_set_counter_overrides(
        app: Path) -> None:
    seed_blog(app)
    from app.posts import Post as AppPost

    report = audit(AppPost.like_tally)
    assert report.drifts == () and report.parents_checked == 2
    assert [(u.key, u.unloaded, u.reason) for u in report.unverifiable] == [
        ((pk, "META"), ("prefix=REACTION#",),
         "unverifiable: fed by prefix=REACTION#, which is not loaded") for pk in ("P1",)]
    sequence = int(raw_item("Blog", P1)["_cseq"]["N"])
    before = blog_items()
    repairs = repair([Drift(AppPost, ("P1", "META"), "like_tally", 5, 3, sequence)])  # as an older audit saw it
    assert [(r.status, r.reason) for r in repairs.repairs] == [
        ("refused", "unverifiable: fed by prefix=REACTION#, which is not loaded")]
    assert not repairs.complete
    assert blog_items() == before
    set_counter(AppPost.like_tally, ("P1", "META"), 4)  # the explicit override still works
    assert raw_item("Blog", P1)["like_tally"] == {"N": "4"}


def test_the_no_feeder_error_says_to_import_more(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_app(app, only=source("blog_models").replace("    post = counted_by", "    # post = counted_by"))
    code, out, err = run(capsys, "audit", "app.only:Post.like_tally")
    assert code == 2 and out == "" and "no counted_by() relation feeds Post.like_tally" in err
    assert "--import" in err


# -- a feeder record survives a refactor: models declared in __main__ or in a factory, a renamed module -------------
def factory_models(module_name: str) -> Tuple[Any, Any, Any]:
    """The models of ``tests/support/apps/factory_models.py``, built by its factory function in a module named
    ``module_name``: what a process running the app as ``__main__``, or after a module was renamed, declares."""
    namespace: Dict[str, Any] = {"__name__": module_name}
    exec(compile(source("factory_models"), f"<{module_name}>", "exec"), namespace)
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
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_app(app, posts=source("blog_models"))
    from app.posts import Like as OldLike  # type: ignore[import-not-found]
    from app.posts import Post as OldPost

    OldPost.create_table(billing_mode="PAY_PER_REQUEST")
    OldPost(pk="P1", sk="META").save()
    OldLike(pk="P1", sk="LIKE#1").save()
    forget_app()
    write_app(app, blog=source("blog_models"))  # app/posts.py renamed app/blog.py
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
    add_entries("Social", social(), "like_tally<tests.support.models:Like.post")  # what 0.1.0 before issue 19 recorded
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

    with refused(r"app.module0.Item.box feed .*Box.items.* feeder id 'relation=Item.box'.*feeder="):
        box_fed_by(None, None)  # refused when the second is declared
    box, (first, named) = box_fed_by(None, "boxed-items")
    box.create_table(billing_mode="PAY_PER_REQUEST")
    assert (first.box.feeder_entry, named.box.feeder_entry) == ("items<relation=Item.box", "items<name=boxed-items")
    assert audit(box.items, parents=["B1"]).missing == (("B1",),)


def box_model() -> Any:
    class Crate(CounterMixin, Model):
        class Meta:
            table_name = "Crates"  # a table of its own
            region = "us-east-1"
        user_id = UnicodeAttribute(hash_key=True)
        items = CounterField()

    Crate.create_table(billing_mode="PAY_PER_REQUEST")
    return Crate


def item_of(box: Any, module: str) -> Any:
    """A class ``Item`` of ``module`` counted into ``box.items`` by a ``children=`` function (no ``prefix=``)."""
    class Item(CounterMixin, Model):
        __module__ = module
        class Meta:
            table_name = "Crates"
            region = "us-east-1"
        user_id = UnicodeAttribute(hash_key=True)
        crate_id = UnicodeAttribute()
        crate = counted_by(box.items, key=lambda i: i.crate_id, children=lambda key: 0)
    return Item


def test_two_classes_of_one_name_in_two_modules_feeding_one_counter_are_refused_when_declared() -> None:
    box = box_model()
    item_of(box, "app.likes")
    with refused(r"app.legacy.Item.crate and app.likes.Item.crate feed .* feeder id 'relation=Item.crate'.*feeder="):
        item_of(box, "app.legacy")
    assert [relation.child_model.__module__ for relation in feeders_of(box.items)] == ["app.likes"]


def test_two_feeders_that_come_to_share_an_identity_are_refused_at_the_first_counted_write() -> None:
    box = box_model()
    made = [item_of(box, "app.factory") for _ in range(2)]  # one class defined twice...
    for n, item in enumerate(made):
        item.__module__ = f"app.module{n}"  # ...then each moved to a module of its own
    box(user_id="C1").save()
    before = snapshot()
    for item in made:
        with pytest.raises(ConfigurationError, match=r"feeder id 'relation=Item.crate'"):
            item(user_id="U1", crate_id="C1").save()
    assert snapshot() == before


@pytest.mark.parametrize("feeder", ["", " padded", "x" * 101, 7, "outside;likes"])
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
    add_entries("Social", social("P1"), "like_tally<tests.support.models:Like.post",
                "bookmarkCount<tests.support.models:Bookmark.post")
    add_entries("Social", social("P2"), f"like_tally<{GONE}")


def test_migrate_feeders_lists_what_is_recorded_and_a_dry_run_writes_nothing() -> None:
    from pynamodb_counters import migrate_feeders

    seed_records()
    before = snapshot()
    report = migrate_feeders(Post.like_tally, migrate=True, forget=[GONE])
    assert snapshot() == before and not report.applied and report.parents_checked == 3
    assert [(e.feeder, e.status, e.relation, e.parents) for e in report.entries] == [
        ("prefix=LIKE#", "current", "Like.post", 3), ("tests.support.models:Like.post", "legacy", "Like.post", 1),
        (GONE, "unknown", None, 1)]
    assert [(c.key, c.shard, c.added, c.removed, c.status) for c in report.changes] == [
        (("P1", "META"), 0, (), ("like_tally<tests.support.models:Like.post",), "planned"),  # its current id is there
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
        (("P1", "META"), ("like_tally<prefix=LIKE#",), ("like_tally<tests.support.models:Like.post",), "changed"),
        (("P2", "META"), (), (f"like_tally<{GONE}",), "changed")]
    assert feeds("Social", social("P1")) == {"like_tally<prefix=LIKE#",
                                             "bookmarkCount<tests.support.models:Bookmark.post"}
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
    add_entries("Social", social("P1"), "like_tally<tests.support.models:Like.post")  # an earlier release's only record
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
    assert seen == [{"like_tally<prefix=LIKE#", "like_tally<tests.support.models:Like.post"}]  # never without a record
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
        migrate_feeders(Post.like_tally, forget=["like_tally<tests.support.models:Like.post"], dry_run=False)
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
        add_entries("Videos", key, "view_count<tests.support.models:View.video")
    report = migrate_feeders(Video.view_count, parents=[("VIDEO#v1", "META")], migrate=True, dry_run=False)
    assert len(report.changes) == len(shards) > 1 and {c.status for c in report.changes} == {"changed"}
    assert all(feeds("Videos", {"pk": i["pk"], "sk": i["sk"]}) == {"view_count<prefix=VIEW#"} for i in shards)
    assert audit(Video.view_count).drifts == () and audit(Video.view_count).unverifiable == ()


def test_the_feeders_command_lists_then_applies_and_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    seed_records()
    before = snapshot()
    code, out, err = run(capsys, "feeders", "tests.support.models:Post.like_tally", "--migrate", "--forget", GONE)
    assert code == 0 and err == "" and snapshot() == before
    assert out.splitlines() == [
        "Post.like_tally: 3 parents checked",
        "  current  prefix=LIKE# (Like.post): 3 parents",
        "  legacy   tests.support.models:Like.post (Like.post): 1 parent",
        f"  unknown  {GONE}: 1 parent",
        'Post ["P1", "META"]: planned - like_tally<tests.support.models:Like.post',
        f'Post ["P2", "META"]: planned - like_tally<{GONE}',
        "2 items to rewrite; dry run, nothing written (use --apply)"]
    code, out, err = run(capsys, "feeders", "tests.support.models:Post.like_tally", "--migrate", "--forget", GONE,
                         "--apply", "--json")
    report = json.loads(out)
    assert code == 0 and report["applied"] is True and [c["status"] for c in report["changes"]] == ["changed"] * 2
    assert report["changes"][1] == {"model": "Post", "key": ["P2", "META"], "shard": 0, "added": [],
                                    "removed": [f"like_tally<{GONE}"], "status": "changed"}
    code, out, _ = run(capsys, "feeders", "tests.support.models:Like.post", "--parent", '["P2", "META"]')
    assert code == 0 and out.splitlines()[1:] == ["  current  prefix=LIKE# (Like.post): 1 parent",
                                                  "0 items to rewrite"]
    code, out, err = run(capsys, "feeders", "tests.support.models:Post.like_tally", "--forget", "prefix=LIKE#",
                         "--apply")
    assert code == 2 and out == "" and "which is loaded" in err and len(err.strip().splitlines()) == 1
