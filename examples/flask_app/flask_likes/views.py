"""
The HTTP endpoints: create and read a post, like and unlike it, read its cached like count; comment on it, edit a
comment (publish, unpublish, change its text, move it to another post), soft-delete and restore it, read the post's
cached comment counts.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from flask import Blueprint, abort, current_app, request
from flask.typing import ResponseReturnValue
from pynamodb.exceptions import UpdateError
from pynamodb_counters import WriteResult
from pynamodb_counters.exceptions import (
    DuplicateChildError,
    MissingChildError,
    ParentNotFoundError,
)

from .cache import CountCache
from .models import (
    COMMENT,
    COMMENT_STATUSES,
    META,
    LikeModels,
    bookmark_key,
    comment_id_of,
    comment_key,
    like_key,
    post_id_of,
    post_key,
)

__all__ = ["bp"]

bp = Blueprint("likes", __name__)

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
TEXT_LIMIT = 2000  # characters of a comment


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


def _post_body(post_id: str, post: Any) -> Dict[str, Any]:
    """A post's counts as the API shows them."""
    return {"post_id": post_id, "likes": post.like_tally, "comment_count": post.comment_count,
            "published_count": post.published_count}


@bp.post("/posts/<post_id>")
def create_post(post_id: str) -> ResponseReturnValue:
    """Create a post with its counts at 0; 409 if it exists."""
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
    return _post_body(post_id, post), 201


def _stored_post(post_id: str, **read: Any) -> Any:
    """The post, read with one strongly consistent GetItem (``read``: more of its arguments); 404 if absent."""
    Post = _models().post
    try:
        return Post.get(post_key(post_id), META, consistent_read=True, **read)
    except Post.DoesNotExist:
        abort(404, f"post {post_id} does not exist")


@bp.get("/posts/<post_id>")
def get_post(post_id: str) -> ResponseReturnValue:
    """The post's like and comment counts, read with one (strongly consistent) GetItem."""
    _check_ids(post_id=post_id)
    return _post_body(post_id, _stored_post(post_id))


@bp.get("/posts/<post_id>/like-count")
def cached_like_count(post_id: str) -> ResponseReturnValue:
    """The like count from the in-app cache: no read on a hit, one GetItem on a miss."""
    _check_ids(post_id=post_id)
    Post = _models().post
    cache: CountCache = current_app.extensions["like_cache"]

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


@bp.put("/posts/<post_id>/bookmarks/<user_id>")
def bookmark(post_id: str, user_id: str) -> ResponseReturnValue:
    """Bookmark: 202, the bookmark stored (again, if it was: idempotent) and counted from the stream once the
    stream handler has run; 404 without post, nothing written."""
    _check_ids(post_id=post_id, user_id=user_id)
    _stored_post(post_id, attributes_to_get=["pk"])
    _models().bookmark(pk=post_key(post_id), sk=bookmark_key(user_id), saved_at=int(time.time())).save()
    return {"post_id": post_id, "user_id": user_id, "counted": "from the stream"}, 202


@bp.delete("/posts/<post_id>/bookmarks/<user_id>")
def unbookmark(post_id: str, user_id: str) -> ResponseReturnValue:
    """Remove a bookmark: 202, counted from the stream; an absent bookmark is 202 too (nothing to remove, no
    record, nothing counted)."""
    _check_ids(post_id=post_id, user_id=user_id)
    _models().bookmark(pk=post_key(post_id), sk=bookmark_key(user_id)).delete()
    return {"post_id": post_id, "user_id": user_id, "counted": "from the stream"}, 202


@bp.get("/posts/<post_id>/bookmark-count")
def bookmark_count(post_id: str) -> ResponseReturnValue:
    """The post's ``bookmark_count`` (one strongly consistent GetItem): the bookmarks the stream handler has
    counted so far."""
    _check_ids(post_id=post_id)
    return {"post_id": post_id, "bookmarks": _stored_post(post_id).bookmark_count}


def _comment_body(comment: Any) -> Dict[str, Any]:
    """A comment as the API shows it."""
    deleted_at = comment.deleted_at.isoformat() if comment.deleted_at is not None else None
    return {"comment_id": comment_id_of(comment.pk), "post_id": comment.post_id, "text": comment.text,
            "status": comment.status, "deleted_at": deleted_at}


def _written(comment: Any, result: Optional[WriteResult]) -> Dict[str, Any]:
    """A comment write's answer: the comment as saved, and the counter changes its transaction committed (none
    when nothing was written)."""
    changes: List[Dict[str, Any]] = [
        {"post_id": post_id_of(change.key[0]), "counter": change.attribute, "delta": change.delta}
        for change in (result.changes if result is not None else ())]
    return {"comment": _comment_body(comment), "changes": changes}


def _load_comment(comment_id: str) -> Any:
    """The stored comment (one strongly consistent GetItem): what an edit changes and counts from; 404."""
    _check_ids(comment_id=comment_id)
    Comment = _models().comment
    try:
        return Comment.get(comment_key(comment_id), COMMENT, consistent_read=True)
    except Comment.DoesNotExist:
        abort(404, f"comment {comment_id} does not exist")


def _text(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= TEXT_LIMIT:
        abort(400, f"text must be a string of 1 to {TEXT_LIMIT} characters")
    return value


@bp.post("/posts/<post_id>/comments")
def create_comment(post_id: str) -> ResponseReturnValue:
    """Comment on a post: a draft, with a new id; 201, counted in ``comment_count``; 404 without post, nothing
    written. The JSON body carries ``text``."""
    _check_ids(post_id=post_id)
    text = _text(_body().get("text"))
    comment = _models().comment(pk=comment_key(uuid.uuid4().hex), sk=COMMENT, post_id=post_id, text=text)
    try:
        result = comment.save()
    except ParentNotFoundError:
        abort(404, f"post {post_id} does not exist")
    body = _written(comment, result)
    return body, 201, {"Location": f"/comments/{body['comment']['comment_id']}"}


@bp.get("/comments/<comment_id>")
def get_comment(comment_id: str) -> ResponseReturnValue:
    """The comment, soft-deleted or not; 404."""
    return _comment_body(_load_comment(comment_id))


@bp.patch("/comments/<comment_id>")
def edit_comment(comment_id: str) -> ResponseReturnValue:
    """Edit a comment: any of ``status`` (``"draft"`` or ``"published"``), ``text``, ``post_id`` (a move).

    The edit path: load the comment, change its attributes, ``save()``. One transaction writes the comment and
    moves its counts from what the stored comment counted for to what the new one counts for. 404 for a missing
    comment; 409 for a move to a post that does not exist (nothing written).
    """
    body = _body()
    unknown = sorted(set(body) - {"status", "text", "post_id"})
    if unknown:
        abort(400, f"unknown field {unknown[0]!r}: a comment's status, text and post_id can change")
    if not body:
        abort(400, "nothing to change: give status, text or post_id")
    if "status" in body and body["status"] not in COMMENT_STATUSES:
        abort(400, "status must be 'draft' or 'published'")
    if "text" in body:
        _text(body["text"])
    if "post_id" in body:
        if not isinstance(body["post_id"], str):
            abort(400, "post_id must be a string")
        _check_ids(post_id=body["post_id"])
    comment = _load_comment(comment_id)
    for name, value in body.items():
        setattr(comment, name, value)
    try:
        result = comment.save()
    except ParentNotFoundError as error:  # the only parent that can be missing is the one it moves to
        abort(409, f"post {post_id_of(error.key[0])} does not exist; the comment was not moved")
    return _written(comment, result)


@bp.delete("/comments/<comment_id>")
def soft_delete_comment(comment_id: str) -> ResponseReturnValue:
    """Soft-delete a comment: ``deleted_at`` set with a counted ``update()``, which takes it out of both counts in
    the same transaction. 200 with the comment; already deleted: 200, nothing written; 404."""
    comment = _load_comment(comment_id)
    if comment.deleted_at is not None:
        return _written(comment, None)
    Comment = _models().comment
    result = comment.update(actions=[Comment.deleted_at.set(datetime.now(timezone.utc))])
    return _written(comment, result)


@bp.post("/comments/<comment_id>/restore")
def restore_comment(comment_id: str) -> ResponseReturnValue:
    """Restore a soft-deleted comment (``deleted_at`` removed, a counted ``update()``): it counts again, as a
    draft or as published. Not deleted: 200, nothing written; 404."""
    comment = _load_comment(comment_id)
    if comment.deleted_at is None:
        return _written(comment, None)
    Comment = _models().comment
    result = comment.update(actions=[Comment.deleted_at.remove()])
    return _written(comment, result)


@bp.get("/posts/<post_id>/comment-count")
def cached_comment_count(post_id: str) -> ResponseReturnValue:
    """The comment counts from the in-app cache: no read on a hit, one GetItem on a miss."""
    _check_ids(post_id=post_id)
    Post = _models().post
    cache: CountCache = current_app.extensions["comment_cache"]

    def load() -> Dict[str, int]:
        try:
            post = Post.get(post_key(post_id), META)
        except Post.DoesNotExist:
            abort(404, f"post {post_id} does not exist")
        return {"comment_count": int(post.comment_count), "published_count": int(post.published_count)}

    return {"post_id": post_id, **cache.read_through(post_id, load)}
