"""
The API: create and read a post, like and unlike it, read its cached like count.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Dict, Optional

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from pynamodb.exceptions import UpdateError
from pynamodb_counters.exceptions import (
    DuplicateChildError,
    MissingChildError,
    ParentNotFoundError,
)

from .cache import cached_like_count
from .dynamo import META, get_models, like_key, post_key
from .errors import ApiError, ApiView

__all__ = ["LikeCountView", "LikeView", "PostView"]

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


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


def _read_tally(post_id: str, consistent: bool) -> int:
    Post = get_models().post
    try:
        return int(Post.get(post_key(post_id), META, consistent_read=consistent).like_tally)
    except Post.DoesNotExist as error:
        raise ApiError(404, f"post {post_id} does not exist") from error


class PostView(ApiView):
    """``/posts/<post_id>``."""

    def post(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """Create a post with ``like_tally`` 0; 409 if it exists."""
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
        return JsonResponse({"post_id": post_id, "likes": post.like_tally}, status=201)

    def get(self, request: HttpRequest, post_id: str) -> JsonResponse:
        """The post's like count, read with one (strongly consistent) GetItem."""
        _check_ids(post_id=post_id)
        return JsonResponse({"post_id": post_id, "likes": _read_tally(post_id, consistent=True)})


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
