"""The app's counters can be audited: after likes, unlikes, comments published, moved, soft-deleted and
restored through the API, an audit finds every post verifiable and every counter exact, also from models built
again by the factory, as another process (the ``pynamodb-counters`` command, a worker) builds them."""
from __future__ import annotations

from typing import Callable

from flask import Flask
from flask.testing import FlaskClient
from pynamodb_counters import audit, skip_counting

from flask_likes.models import LikeModels, build_models, like_key, post_key

from .conftest import REGION, TABLE


def test_an_audit_after_writes_finds_no_unverifiable_parent_and_no_drift(
        app: Flask, client: FlaskClient, make_post: Callable[[str], None]) -> None:
    for post_id in ("p1", "p2"):
        make_post(post_id)
    for user in ("u1", "u2", "u3"):
        assert client.put(f"/posts/p1/likes/{user}", json={"liked_at": 1}).status_code == 201
    assert client.delete("/posts/p1/likes/u2").status_code == 204
    ids = [client.post("/posts/p1/comments", json={"text": f"c{n}"}).json["comment"]["comment_id"] for n in range(3)]
    assert client.patch(f"/comments/{ids[0]}", json={"status": "published"}).status_code == 200
    assert client.patch(f"/comments/{ids[1]}", json={"post_id": "p2", "status": "published"}).status_code == 200
    assert client.delete(f"/comments/{ids[2]}").status_code == 200
    assert client.post(f"/comments/{ids[2]}/restore").status_code == 200
    assert client.delete(f"/comments/{ids[0]}").status_code == 200

    for models in (app.extensions["likes_models"], build_models(TABLE, None, REGION)):  # this app's, another's
        for counter in (models.post.like_tally, models.post.comment_count, models.post.published_count):
            report = audit(counter)
            assert (report.parents_checked, report.unverifiable, report.drifts) == (2, (), ()), counter


def test_an_audit_finds_drift_written_around_the_library(app: Flask, make_post: Callable[[str], None]) -> None:
    make_post("p1")
    models: LikeModels = app.extensions["likes_models"]
    with skip_counting():
        models.like(pk=post_key("p1"), sk=like_key("u9"), liked_at=1).save()  # a backfill: counter 0, 1 like
    [drift] = audit(build_models(TABLE, None, REGION).post.like_tally).drifts
    assert (drift.key, drift.stored, drift.actual) == ((post_key("p1"), "META"), 0, 1)
    with skip_counting():
        models.like(pk=post_key("p1"), sk=like_key("u9")).delete()  # leave the table exact for the fixture
