"""
The likes story, end to end: ``pynamodb-counters demo``.

Against an embedded moto backend when no endpoint is given (``pip install "pynamodb-counters[moto]"``), or
against any DynamoDB endpoint (a table is created if missing and kept).
"""
from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.constants import COUNT, STREAM_NEW_AND_OLD_IMAGE
from pynamodb.models import Model

from .. import signals
from .._costs import read_units
from ..declare._attributes import CounterField
from ..declare._relations import counted_by
from ..exceptions import ConfigurationError, DuplicateChildError, LimitExceededError
from ..models import CounterMixin
from ..reconcile import audit, repair
from ..streams import count_stream
from ..testing.streams import StreamReader
from ..transactions import CountedTransaction

__all__ = ["run"]


def social_models(table: str, host: Optional[str], region: str) -> Tuple[Any, ...]:
    """The README's ``Post`` and ``Like`` models, a ``Comment`` that changes (published, moved, soft-deleted), a
    ``Game`` of 3 players with its ``Player`` (a limit), and ``DailyHearts`` created by the first ``Heart`` of
    each day (a rollup), all bound to ``table`` at ``host``."""

    class Post(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        title = UnicodeAttribute(null=True)
        like_tally = CounterField()
        comment_count = CounterField()
        published_count = CounterField()

        @classmethod
        def audit_filter(cls) -> Any:
            return cls.sk == "META"  # likes share the table

    class Like(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        liked_at = NumberAttribute()
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")

    class Comment(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)  # "COMMENT#c1": its own partition, so that it can move
        sk = UnicodeAttribute(range_key=True)  # "COMMENT"
        post_id = UnicodeAttribute()
        status = UnicodeAttribute(default="draft")
        deleted_at = NumberAttribute(null=True)
        post = counted_by(Post.comment_count, key=lambda c: (c.post_id, "META"), when=lambda c: c.deleted_at is None)
        published = counted_by(Post.published_count, key=lambda c: (c.post_id, "META"),
                               when=lambda c: c.status == "published" and c.deleted_at is None)

    class Game(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)  # "GAME#g1"
        sk = UnicodeAttribute(range_key=True)  # "GAME"
        players = CounterField(limit=3)

    class Player(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)  # the game's "GAME#g1"
        sk = UnicodeAttribute(range_key=True)  # "PLAYER#ana"
        game = counted_by(Game.players, key=lambda p: (p.pk, "GAME"), prefix="PLAYER#")

    class DailyHearts(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)  # the post's "POST#a91f"
        sk = UnicodeAttribute(range_key=True)  # "DAY#2026-11-30"
        hearts = CounterField()

    class Heart(CounterMixin, Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)  # the post's "POST#a91f"
        sk = UnicodeAttribute(range_key=True)  # "HEART#USER#7c20#2026-11-30"
        day = UnicodeAttribute()
        daily = counted_by(DailyHearts.hearts, key=lambda h: (h.pk, f"DAY#{h.day}"), create_parent=True)

    models = (Post, Like, Comment, Game, Player, DailyHearts, Heart)
    for model in models:
        meta: Any = model.Meta
        meta.host, meta.region = host, region
    return models


def stream_models(table: str, host: Optional[str], region: str) -> Tuple[Any, Any]:
    """A ``Photo`` and its ``PhotoLike``, counted from the stream of ``table`` (``counting="stream"``): a like is a
    plain PutItem, whoever writes it, and :func:`~pynamodb_counters.streams.count_stream` counts it."""

    class Photo(CounterMixin, Model):
        class Meta:
            table_name = table
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE

        pk = UnicodeAttribute(hash_key=True)  # "PHOTO#b7e1"
        sk = UnicodeAttribute(range_key=True)  # "META"
        like_tally = CounterField()

    class PhotoLike(CounterMixin, Model):
        class Meta:
            table_name = table
            stream_view_type = STREAM_NEW_AND_OLD_IMAGE

        pk = UnicodeAttribute(hash_key=True)  # the photo's "PHOTO#b7e1"
        sk = UnicodeAttribute(range_key=True)  # "LIKE#USER#7c20"
        photo = counted_by(Photo.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#", counting="stream")

    for model in (Photo, PhotoLike):
        meta: Any = model.Meta
        meta.host, meta.region = host, region
    return Photo, PhotoLike


@contextlib.contextmanager
def embedded_backend() -> Iterator[None]:
    """moto's in-process DynamoDB, with dummy credentials that never leave this process."""
    try:
        from moto import mock_aws
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ConfigurationError('the embedded backend needs moto: pip install "pynamodb-counters[moto]", '
                                 "or pass --endpoint-url") from error
    with mock_aws():
        yield


def run(endpoint_url: Optional[str] = None, region: str = "us-east-1", table: str = "Social",
        out: Callable[[str], Any] = print) -> int:
    """Tell the likes story; return the exit code (0 when every step behaved as documented)."""
    backend = embedded_backend() if endpoint_url is None else contextlib.nullcontext()
    with backend:
        Post, Like, Comment, Game, Player, DailyHearts, Heart = social_models(table, endpoint_url, region)
        if not Post.exists():
            Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        post_id = f"POST#{uuid.uuid4().hex[:4]}"
        out(f"engine: {endpoint_url or 'embedded moto (in-process)'}; table {table}")
        Post(pk=post_id, sk="META", title="Hello, counters").save()
        out(f"created {post_id} with like_tally = 0")

        def likes(user: str) -> Any:
            return Like(pk=post_id, sk=f"LIKE#USER#{user}", liked_at=1750636800)

        plan = CountedTransaction(token="(one token per write)")
        plan.save(likes("7c20"))
        out("one like is one TransactWriteItems:")
        for item in plan.plan().items:
            for action, request in item.items():
                _show(action, request, "  ", out)

        with signals.duplicate_rejected.connected_to(
                lambda sender, error, **_: out(f"  signal duplicate_rejected: {error.key[1]}"), sender=Like):
            for user in ("7c20", "19ab", "e004"):
                result = likes(user).save()
                out(f"like by USER#{user}: +1 in {result.attempts} request")
            try:
                likes("7c20").save()
            except DuplicateChildError as error:
                out(f"like by USER#7c20 again: refused ({type(error).__name__}), nothing written")
        likes("19ab").delete()
        out("unlike by USER#19ab: -1")

        stored = Post.get(post_id, "META", consistent_read=True)  # one GetItem
        children = Like.count(post_id, Like.sk.startswith("LIKE#"), consistent_read=True)
        out(f"read back with one GetItem: like_tally = {stored.like_tally}; like items = {children}")
        out("cost: a like or an unlike writes two items transactionally, about 4 WCU")
        exact = stored.like_tally == children == 2
        changing = comments_story(Post, Comment, post_id, out)
        admitting = game_story(Game, Player, out)
        rolling = rollup_story(DailyHearts, Heart, post_id, out)
        reconciled = reconcile_story(Post, Like, post_id, out)
        streamed = stream_story(*stream_models(f"{table}Stream", endpoint_url, region), out)
        return 0 if exact and changing and admitting and rolling and reconciled and streamed else 1


def game_story(Game: Any, Player: Any, out: Callable[[str], Any]) -> bool:
    """A limit: the fourth player of a three-player game is refused, exactly, with nothing written."""
    game_id = f"GAME#{uuid.uuid4().hex[:4]}"
    Game(pk=game_id, sk="GAME").save()
    for user in ("ana", "bo", "cy"):
        Player(pk=game_id, sk=f"PLAYER#{user}").save()
    out(f"a limit: {game_id} takes 3 players (CounterField(limit=3)); ana, bo and cy joined")
    try:
        Player(pk=game_id, sk="PLAYER#dee").save()
        refused = False
    except LimitExceededError as error:
        out(f"  dee refused ({type(error).__name__}: {error.attribute} holds {error.stored}, limit {error.limit}), "
            f"nothing written")
        refused = True
    players = Player.count(game_id, Player.sk.startswith("PLAYER#"), consistent_read=True)
    return refused and players == Game.get(game_id, "GAME", consistent_read=True).players == 3


def rollup_story(DailyHearts: Any, Heart: Any, post_id: str, out: Callable[[str], Any]) -> bool:
    """A rollup: each day's item is created by its first heart; a week of them is one Query."""
    days = [f"2026-11-{day:02d}" for day in range(24, 31)]
    for n, day in enumerate(days):
        for user in range(n % 3 + 1):
            Heart(pk=post_id, sk=f"HEART#USER#{user}#{day}", day=day).save()
    week = list(DailyHearts.query(post_id, DailyHearts.sk.between(f"DAY#{days[0]}", f"DAY#{days[-1]}"),
                                  consistent_read=True))
    counts = [day.hearts for day in week]
    out("a rollup: hearts per day, each day's item created by its first heart (create_parent=True)")
    out(f"  a week of them in one Query: {counts}")
    return counts == [n % 3 + 1 for n in range(7)]


def comments_story(Post: Any, Comment: Any, post_id: str, out: Callable[[str], Any]) -> bool:
    """A comment that changes: published, moved to another post, soft-deleted; the counts follow each time."""
    other = f"POST#{uuid.uuid4().hex[:4]}"
    Post(pk=other, sk="META", title="Another post").save()
    comment_id = f"COMMENT#{uuid.uuid4().hex[:4]}"

    def counts() -> str:
        posts = [Post.get(key, "META", consistent_read=True) for key in (post_id, other)]
        return ", ".join(f"{post.comment_count}/{post.published_count}" for post in posts)

    out(f"comments that change (comments/published on {post_id}, {other}):")
    Comment(pk=comment_id, sk="COMMENT", post_id=post_id).save()
    out(f"  a draft on {post_id}: {counts()}")
    comment = Comment.get(comment_id, "COMMENT", consistent_read=True)
    comment.status = "published"
    published = comment.save()
    out(f"  published (load, change, save(): {len(published.changes)} change, one transaction): {counts()}")
    comment.post_id = other
    moved = comment.save()
    out(f"  moved to {other} ({len(moved.changes)} changes, one transaction of 3 actions): {counts()}")
    comment.deleted_at = 1750636800
    comment.save()
    out(f"  soft-deleted: {counts()}")
    final = [Post.get(key, "META", consistent_read=True) for key in (post_id, other)]
    return [(p.comment_count, p.published_count) for p in final] == [(0, 0), (0, 0)] and len(moved.changes) == 4


def reconcile_story(Post: Any, Like: Any, post_id: str, out: Callable[[str], Any]) -> bool:
    """Drift planted with a raw write, found by an audit, fixed by a repair; then what counting costs."""
    key = (post_id, "META")
    Post._get_connection().update_item(post_id, range_key="META", actions=[Post.like_tally.set(7)])
    out("reconciliation: a raw UpdateItem, bypassing the library, sets like_tally = 7 (2 likes exist)")
    report = audit(Post.like_tally, parents=[key])
    for drift in report.drifts:
        out(f"  audit: {report.parents_checked} parent checked, {report.drift_count} drifted: {drift.attribute} "
            f"stored {drift.stored}, actual {drift.actual}")
    repairs = repair(report.drifts).repairs
    for fixed in repairs:
        out(f"  repair: {fixed.status} {fixed.before} -> {fixed.after} (one conditional UpdateItem)")
    clean = audit(Post.like_tally, parents=[key])
    out(f"  audit again: {clean.drift_count} drifted")

    likes = Like._get_connection().query(post_id, range_key_condition=Like.sk.startswith("LIKE#"), select=COUNT,
                                         return_consumed_capacity="TOTAL")
    get = Post._get_connection().get_item(post_id, range_key="META")
    out(f"read cost of the count: a counting Query reads every like ({likes['Count']} here): "
        f"{_units(likes)} RCU reported;")
    out(f"  one GetItem of the stored counter: {_units(get)} RCU reported")
    for n in (1_000, 10_000):
        out(f"  {n:,} likes of ~200 bytes: the Query reads {read_units(n * 200, consistent=False):g} RCU, "
            f"the GetItem {read_units(400, consistent=False):g} (eventually consistent)")
    return report.drift_count == 1 and [r.status for r in repairs] == ["repaired"] and clean.drift_count == 0


def stream_story(Photo: Any, PhotoLike: Any, out: Callable[[str], Any]) -> bool:
    """Counting from the stream: likes written as plain items (one by another service, through its own client),
    counted by the handler a Lambda function on the stream would run; a batch delivered twice; an audit while a like
    waits for the function."""
    if not Photo.exists():
        Photo.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    stream = StreamReader(Photo)  # what the function's event source mapping reads: records since its checkpoint
    stream.pending()  # earlier runs' records, against a kept table, are not this story's
    table = Photo.Meta.table_name
    photo_id = f"PHOTO#{uuid.uuid4().hex[:4]}"
    key = (photo_id, "META")
    Photo(pk=photo_id, sk="META").save()
    out(f"counting from the stream ({table}, NEW_AND_OLD_IMAGES; counting=\"stream\"): {photo_id}")
    PhotoLike(pk=photo_id, sk="LIKE#USER#7c20").save()
    out("  our app's like: one plain PutItem (1 WCU), nothing counted yet")
    client = PhotoLike._get_connection().connection.client  # another service's writer, which knows no library
    client.put_item(TableName=table, Item={"pk": {"S": photo_id}, "sk": {"S": "LIKE#USER#19ab"}})
    out("  another service's like: a raw PutItem of its own")
    out("  the Lambda function on the stream: return count_stream(event, models=[PhotoLike])")

    def tally() -> int:
        return int(Photo.get(*key, consistent_read=True).like_tally)

    batch = stream.pending()
    first = count_stream(batch, models=[PhotoLike])  # the Lambda function's whole body
    out(f"  a batch of {len(batch['Records'])} records: {len(first.counted)} counted in "
        f"{first.updates} UpdateItem, {len(first.skipped)} skipped (the photo's own): like_tally = {tally()}")
    again = count_stream(batch, models=[PhotoLike])
    out(f"  the same batch again (Lambda retries it after a timeout): {len(again.counted)} counted, "
        f"like_tally = {tally()}")
    PhotoLike(pk=photo_id, sk="LIKE#USER#e004").save()
    waiting = audit(Photo.like_tally, parents=[key])
    out(f"  audit while a third like waits: {waiting.drift_count} drifted (stored {tally()}: the waiting like is "
        f"not drift)")
    last = count_stream(stream.pending(), models=[PhotoLike])
    out(f"  the next batch: {len(last.counted)} counted, like_tally = {tally()}")
    return ([len(first.counted), len(again.counted), len(last.counted)] == [2, 0, 1] and waiting.drift_count == 0
            and not waiting.unverifiable and tally() == 3)


def _show(field: str, value: Any, indent: str, out: Callable[[str], Any]) -> None:
    """``field: value`` as JSON on one line, or, when that is long, one line per entry of the value."""
    line = f"{indent}{field}: {json.dumps(value)}"
    if len(line) <= 100 or not isinstance(value, dict):
        out(line)
        return
    out(f"{indent}{field}:")
    for key, inner in value.items():
        _show(key, inner, indent + "  ", out)


def _units(response: Dict[str, Any]) -> str:
    capacity = response.get("ConsumedCapacity") or {}
    return f"{capacity['CapacityUnits']:g}" if "CapacityUnits" in capacity else "no"
