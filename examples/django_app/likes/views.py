"""
The API: create and read a post, like and unlike it, read its cached like count; comment on it, edit a comment
(publish, unpublish, change its text, move it to another post), soft-delete and restore it, read the post's cached
comment counts.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from pynamodb.exceptions import UpdateError
from pynamodb_counters import WriteResult
from pynamodb_counters.exceptions import (
    DuplicateChildError,
    MissingChildError,
    ParentNotFoundError,
)

from .cache import cached_comment_counts, cached_like_count
from .dynamo import (
    COMMENT,
    COMMENT_PREFIX,
    COMMENT_STATUSES,
    META,
    POST_PREFIX,
    comment_key,
    get_models,
    like_key,
    post_key,
    strip,
)
from .errors import ApiError, ApiView

__all__ = ["CommentCountView", "CommentRestoreView", "CommentView", "CommentsView", "LikeCountView", "LikeView",
           "PostView"]

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
TEXT_LIMIT = 2000  # characters of a comment


def _check_ids(**ids: str) -> None:
    for name, value in ids.items():
        if not _ID.fullmatch(value):
            raise ApiError(400, f"{name} must be 1 to 64 letters, digits, '-' or '_'")


def _body(request: HttpRequest) -> Dict[str, Any]:
    """The JSON object in the body; ``{}`` without a body or without the JSON content type (as in Flask)."""
    if request.content_type != "application/json" or not request.body:
        return {}
    try:
        body = json.loads(request.body)
    except ValueError as error:
        raise ApiError(400, "the body must be JSON") from error
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def _idempotency_token(request: HttpRequest) -> Optional[str]:
    """The ``Idempotency-Key`` header, the write's ``ClientRequestToken`` (1 to 36 characters), if sent."""
    key: Optional[str] = request.headers.get("Idempotency-Key")
    if key is not None and not 1 <= len(key) <= 36:
        raise ApiError(400, "Idempotency-Key must be 1 to 36 characters")
    return key


def _idempotent() -> bool:
    return bool(settings.LIKES["DUPLICATE_LIKE_STATUS"] == 200)


def _read_post(post_id: str, consistent: bool) -> Any:
    """The post (one GetItem); 404."""
    Post = get_models().post
    try:
        return Post.get(post_key(post_id), META, consistent_read=consistent)
    except Post.DoesNotExist as error:
        raise ApiError(404, f"post {post_id} does not exist") from error


def _read_tally(post_id: str, consistent: bool) -> int:
    return int(_read_post(post_id, consistent).like_tally)


def _post_body(post_id: str, post: Any) -> Dict[str, Any]:
    """A post's counts as the API shows them."""
    return {"post_id": post_id, "likes": post.like_tally, "comment_count": post.comment_count,
            "published_count": post.published_count}


class PostView(ApiView):
    """``/posts/<post_id>``."""

    def post(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """Create a post with its counts at 0; 409 if it exists."""
        _check_ids(post_id=post_id)
        title = _body(request).get("title")
        if title is not None and not isinstance(title, str):
            raise ApiError(400, "title must be a string")
        Post = get_models().post
        post = Post(pk=post_key(post_id), sk=META, title=title)
        try:
            post.save(condition=Post.pk.does_not_exist())
        except UpdateError as error:
            if error.cause_response_code == "ConditionalCheckFailedException":
                raise ApiError(409, f"post {post_id} already exists") from error
            raise
        return JsonResponse(_post_body(post_id, post), status=201)

    def get(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """The post's like and comment counts, read with one (strongly consistent) GetItem."""
        _check_ids(post_id=post_id)
        return JsonResponse(_post_body(post_id, _read_post(post_id, consistent=True)))


class LikeCountView(ApiView):
    """``/posts/<post_id>/like-count``: the like count from Django's cache (one GetItem on a miss)."""

    def get(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """The cached count."""
        _check_ids(post_id=post_id)
        likes = cached_like_count(post_id, lambda: _read_tally(post_id, consistent=False))
        return JsonResponse({"post_id": post_id, "likes": likes})


class LikeView(ApiView):
    """``/posts/<post_id>/likes/<user_id>``."""

    def put(self, request: HttpRequest, post_id: str, user_id: str) -> JsonResponse:
        """Like: 201 when counted; a duplicate is 409, or 200 with ``DUPLICATE_LIKE_STATUS`` 200; 404 without
        post. The JSON body may carry ``liked_at`` (seconds since the epoch; default: now)."""
        _check_ids(post_id=post_id, user_id=user_id)
        token = _idempotency_token(request)
        liked_at = _body(request).get("liked_at", int(time.time()))
        if isinstance(liked_at, bool) or not isinstance(liked_at, int) or liked_at < 0:
            raise ApiError(400, "liked_at must be a non-negative integer")
        like = get_models().like(pk=post_key(post_id), sk=like_key(user_id), liked_at=liked_at)
        try:
            result = like.save(token=token, ignore_duplicate=_idempotent())
        except ParentNotFoundError as error:
            raise ApiError(404, f"post {post_id} does not exist") from error
        except DuplicateChildError as error:
            stored = getattr(error.item, "liked_at", None)  # the like already stored, when DynamoDB returned it
            return JsonResponse({"error": f"{user_id} already likes post {post_id}", "liked_at": stored},
                                status=409)
        body = {"post_id": post_id, "user_id": user_id, "created": not result.duplicate}
        return JsonResponse(body, status=200 if result.duplicate else 201)

    def delete(self, request: HttpRequest, post_id: str, user_id: str) -> HttpResponse:
        """Unlike: 204; an absent like is 404, or 204 with ``DUPLICATE_LIKE_STATUS`` 200 (idempotent)."""
        _check_ids(post_id=post_id, user_id=user_id)
        token = _idempotency_token(request)
        like = get_models().like(pk=post_key(post_id), sk=like_key(user_id))
        try:
            like.delete(token=token, ignore_missing=_idempotent())
        except MissingChildError as error:
            raise ApiError(404, f"{user_id} does not like post {post_id}") from error
        except ParentNotFoundError as error:
            raise ApiError(404, f"post {post_id} does not exist") from error
        return HttpResponse(status=204)


def _comment_body(comment: Any) -> Dict[str, Any]:
    """A comment as the API shows it."""
    deleted_at = comment.deleted_at.isoformat() if comment.deleted_at is not None else None
    return {"comment_id": strip(COMMENT_PREFIX, comment.pk), "post_id": comment.post_id, "text": comment.text,
            "status": comment.status, "deleted_at": deleted_at}


def _written(comment: Any, result: Optional[WriteResult], status: int = 200) -> JsonResponse:
    """A comment write's answer: the comment as saved, and the counter changes its transaction committed (none
    when nothing was written)."""
    changes: List[Dict[str, Any]] = [
        {"post_id": strip(POST_PREFIX, change.key[0]), "counter": change.attribute, "delta": change.delta}
        for change in (result.changes if result is not None else ())]
    return JsonResponse({"comment": _comment_body(comment), "changes": changes}, status=status)


def _load_comment(comment_id: str) -> Any:
    """The stored comment (one strongly consistent GetItem): what an edit changes and counts from; 404."""
    _check_ids(comment_id=comment_id)
    Comment = get_models().comment
    try:
        return Comment.get(comment_key(comment_id), COMMENT, consistent_read=True)
    except Comment.DoesNotExist as error:
        raise ApiError(404, f"comment {comment_id} does not exist") from error


def _text(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= TEXT_LIMIT:
        raise ApiError(400, f"text must be a string of 1 to {TEXT_LIMIT} characters")
    return value


class CommentsView(ApiView):
    """``/posts/<post_id>/comments``."""

    def post(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """Comment on a post: a draft, with a new id; 201, counted in ``comment_count``; 404 without post,
        nothing written. The JSON body carries ``text``."""
        _check_ids(post_id=post_id)
        text = _text(_body(request).get("text"))
        comment = get_models().comment(pk=comment_key(uuid.uuid4().hex), sk=COMMENT, post_id=post_id, text=text)
        try:
            result = comment.save()
        except ParentNotFoundError as error:
            raise ApiError(404, f"post {post_id} does not exist") from error
        response = _written(comment, result, status=201)
        response["Location"] = f"/comments/{strip(COMMENT_PREFIX, comment.pk)}"
        return response


class CommentView(ApiView):
    """``/comments/<comment_id>``."""

    def get(self, request: HttpRequest, comment_id: str) -> JsonResponse:
        """The comment, soft-deleted or not; 404."""
        return JsonResponse(_comment_body(_load_comment(comment_id)))

    def patch(self, request: HttpRequest, comment_id: str) -> JsonResponse:
        """Edit a comment: any of ``status`` (``"draft"`` or ``"published"``), ``text``, ``post_id`` (a move).

        The edit path: load the comment, change its attributes, ``save()``. One transaction writes the comment and
        moves its counts from what the stored comment counted for to what the new one counts for. 404 for a
        missing comment; 409 for a move to a post that does not exist (nothing written).
        """
        body = _body(request)
        unknown = sorted(set(body) - {"status", "text", "post_id"})
        if unknown:
            raise ApiError(400, f"unknown field {unknown[0]!r}: a comment's status, text and post_id can change")
        if not body:
            raise ApiError(400, "nothing to change: give status, text or post_id")
        if "status" in body and body["status"] not in COMMENT_STATUSES:
            raise ApiError(400, "status must be 'draft' or 'published'")
        if "text" in body:
            _text(body["text"])
        if "post_id" in body:
            if not isinstance(body["post_id"], str):
                raise ApiError(400, "post_id must be a string")
            _check_ids(post_id=body["post_id"])
        comment = _load_comment(comment_id)
        for name, value in body.items():
            setattr(comment, name, value)
        try:
            result = comment.save()
        except ParentNotFoundError as error:  # the only parent that can be missing is the one it moves to
            raise ApiError(409, f"post {strip(POST_PREFIX, error.key[0])} does not exist; the comment was not "
                                f"moved") from error
        return _written(comment, result)

    def delete(self, request: HttpRequest, comment_id: str) -> JsonResponse:
        """Soft-delete a comment: ``deleted_at`` set with a counted ``update()``, which takes it out of both counts
        in the same transaction. 200 with the comment; already deleted: 200, nothing written; 404."""
        comment = _load_comment(comment_id)
        if comment.deleted_at is not None:
            return _written(comment, None)
        Comment = get_models().comment
        result = comment.update(actions=[Comment.deleted_at.set(datetime.now(timezone.utc))])
        return _written(comment, result)


class CommentRestoreView(ApiView):
    """``/comments/<comment_id>/restore``."""

    def post(self, request: HttpRequest, comment_id: str) -> JsonResponse:
        """Restore a soft-deleted comment (``deleted_at`` removed, a counted ``update()``): it counts again, as a
        draft or as published. Not deleted: 200, nothing written; 404."""
        comment = _load_comment(comment_id)
        if comment.deleted_at is None:
            return _written(comment, None)
        Comment = get_models().comment
        result = comment.update(actions=[Comment.deleted_at.remove()])
        return _written(comment, result)


class CommentCountView(ApiView):
    """``/posts/<post_id>/comment-count``: the comment counts from Django's cache (one GetItem on a miss)."""

    def get(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """The cached counts."""
        _check_ids(post_id=post_id)

        def load() -> Dict[str, int]:
            post = _read_post(post_id, consistent=False)
            return {"comment_count": int(post.comment_count), "published_count": int(post.published_count)}

        return JsonResponse({"post_id": post_id, **cached_comment_counts(post_id, load)})
