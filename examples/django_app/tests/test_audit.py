"""The app's counters can be audited: after likes, unlikes, comments published, moved, soft-deleted and
restored through the API, an audit finds every post verifiable and every counter exact, also from models built
again by the factory, as another process (the ``pynamodb-counters`` command, a worker) builds them."""
from __future__ import annotations

from typing import Callable

from django.conf import settings
from django.test import Client
from pynamodb_counters import audit, skip_counting

from likes.dynamo import LikeModels, build_models, get_models, like_key, post_key

from .test_comments import patch, send


def rebuilt() -> LikeModels:
    """The models as another process builds them from the same settings."""
    return build_models(settings.LIKES["TABLE"], settings.LIKES["HOST"], settings.LIKES["REGION"])


def test_an_audit_after_writes_finds_no_unverifiable_parent_and_no_drift(
        client: Client, make_post: Callable[[str], None]) -> None:
    for post_id in ("p1", "p2"):
        make_post(post_id)
    for user in ("u1", "u2", "u3"):
        assert send(client, "put", f"/posts/p1/likes/{user}", {"liked_at": 1}).status_code == 201
    assert client.delete("/posts/p1/likes/u2").status_code == 204
    ids = [send(client, "post", "/posts/p1/comments", {"text": f"c{n}"}).json()["comment"]["comment_id"]
           for n in range(3)]
    assert patch(client, ids[0], {"status": "published"}).status_code == 200
    assert patch(client, ids[1], {"post_id": "p2", "status": "published"}).status_code == 200
    assert client.delete(f"/comments/{ids[2]}").status_code == 200
    assert client.post(f"/comments/{ids[2]}/restore").status_code == 200
    assert client.delete(f"/comments/{ids[0]}").status_code == 200

    for models in (get_models(), rebuilt()):  # this process's models, and another's
        for counter in (models.post.like_tally, models.post.comment_count, models.post.published_count):
            report = audit(counter)
            assert (report.parents_checked, report.unverifiable, report.drifts) == (2, (), ()), counter


def test_an_audit_finds_drift_written_around_the_library(make_post: Callable[[str], None]) -> None:
    make_post("p1")
    models = get_models()
    with skip_counting():
        models.like(pk=post_key("p1"), sk=like_key("u9"), liked_at=1).save()  # a backfill: counter 0, 1 like
    [drift] = audit(rebuilt().post.like_tally).drifts
    assert (drift.key, drift.stored, drift.actual) == ((post_key("p1"), "META"), 0, 1)
    with skip_counting():
        models.like(pk=post_key("p1"), sk=like_key("u9")).delete()  # leave the table exact for the fixture
