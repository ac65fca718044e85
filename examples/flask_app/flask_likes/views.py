"""
The HTTP endpoints: create and read a post, like and unlike it, read its cached like count.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Dict, Optional

from flask import Blueprint, abort, current_app, request
from flask.typing import ResponseReturnValue
from pynamodb.exceptions import UpdateError
from pynamodb_counters.exceptions import (
    DuplicateChildError,
    MissingChildError,
    ParentNotFoundError,
)

from .cache import LikeCache
from .models import META, LikeModels, like_key, post_key

__all__ = ["bp"]

bp = Blueprint("likes", __name__)

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _models() -> LikeModels:
    models: LikeModels = current_app.extensions["likes_models"]
    return models


def _check_ids(**ids: str) -> None:
    for name, value in ids.items():
        if not _ID.fullmatch(value):
            abort(400, f"{name} must be 1 to 64 letters, digits, '-' or '_'")


def _idempotency_token() -> Optional[str]:
    """The ``Idempotency-Key`` header, the write's ``ClientRequestToken`` (1 to 36 characters), if sent."""
    key: Optional[str] = request.headers.get("Idempotency-Key")
    if key is not None and not 1 <= len(key) <= 36:
        abort(400, "Idempotency-Key must be 1 to 36 characters")
    return key


def _body() -> Dict[str, Any]:
    """The JSON object in the body; ``{}`` without a body or without the JSON content type (as in the Django
    example); 400 for a JSON body that does not parse or is not an object."""
    if not request.is_json or not request.get_data():
        return {}
    try:
        body = json.loads(request.get_data())
    except ValueError:
        abort(400, "the body must be JSON")
    if not isinstance(body, dict):
        abort(400, "the body must be a JSON object")
    return body


@bp.post("/posts/<post_id>")
def create_post(post_id: str) -> ResponseReturnValue:
    """Create a post with ``like_tally`` 0; 409 if it exists."""
    _check_ids(post_id=post_id)
    title = _body().get("title")
    if title is not None and not isinstance(title, str):
        abort(400, "title must be a string")
    Post = _models().post
    post = Post(pk=post_key(post_id), sk=META, title=title)
    try:
        post.save(condition=Post.pk.does_not_exist())
    except UpdateError as error:
        if error.cause_response_code == "ConditionalCheckFailedException":
            abort(409, f"post {post_id} already exists")
        raise
    return {"post_id": post_id, "likes": post.like_tally}, 201


@bp.get("/posts/<post_id>")
def get_post(post_id: str) -> ResponseReturnValue:
    """The post's like count, read with one (strongly consistent) GetItem."""
    _check_ids(post_id=post_id)
    Post = _models().post
    try:
        post = Post.get(post_key(post_id), META, consistent_read=True)
    except Post.DoesNotExist:
        abort(404, f"post {post_id} does not exist")
    return {"post_id": post_id, "likes": post.like_tally}


@bp.get("/posts/<post_id>/like-count")
def cached_like_count(post_id: str) -> ResponseReturnValue:
    """The like count from the in-app cache: no read on a hit, one GetItem on a miss."""
    _check_ids(post_id=post_id)
    Post = _models().post
    cache: LikeCache = current_app.extensions["like_cache"]

    def load() -> int:
        try:
            return int(Post.get(post_key(post_id), META).like_tally)
        except Post.DoesNotExist:
            abort(404, f"post {post_id} does not exist")

    return {"post_id": post_id, "likes": cache.read_through(post_id, load)}


@bp.put("/posts/<post_id>/likes/<user_id>")
def like(post_id: str, user_id: str) -> ResponseReturnValue:
    """Like: 201 when counted; a duplicate answers ``DUPLICATE_LIKE_STATUS`` (200 or 409); 404 without post.

    The JSON body may carry ``liked_at`` (seconds since the epoch; default: now).
    """
    _check_ids(post_id=post_id, user_id=user_id)
    token = _idempotency_token()
    liked_at = _body().get("liked_at", int(time.time()))
    if isinstance(liked_at, bool) or not isinstance(liked_at, int) or liked_at < 0:
        abort(400, "liked_at must be a non-negative integer")
    idempotent = current_app.config["DUPLICATE_LIKE_STATUS"] == 200
    new_like = _models().like(pk=post_key(post_id), sk=like_key(user_id), liked_at=liked_at)
    try:
        result = new_like.save(token=token, ignore_duplicate=idempotent)
    except ParentNotFoundError:
        abort(404, f"post {post_id} does not exist")
    except DuplicateChildError as error:
        stored = getattr(error.item, "liked_at", None)  # the like already stored, when DynamoDB returned it
        return {"error": f"{user_id} already likes post {post_id}", "liked_at": stored}, 409
    body = {"post_id": post_id, "user_id": user_id, "created": not result.duplicate}
    return body, 200 if result.duplicate else 201


@bp.delete("/posts/<post_id>/likes/<user_id>")
def unlike(post_id: str, user_id: str) -> ResponseReturnValue:
    """Unlike: 204; an absent like is 404, or 204 when ``DUPLICATE_LIKE_STATUS`` is 200 (idempotent)."""
    _check_ids(post_id=post_id, user_id=user_id)
    token = _idempotency_token()
    idempotent = current_app.config["DUPLICATE_LIKE_STATUS"] == 200
    old_like = _models().like(pk=post_key(post_id), sk=like_key(user_id))
    try:
        old_like.delete(token=token, ignore_missing=idempotent)
    except MissingChildError:
        abort(404, f"{user_id} does not like post {post_id}")
    except ParentNotFoundError:
        abort(404, f"post {post_id} does not exist")
    return "", 204

