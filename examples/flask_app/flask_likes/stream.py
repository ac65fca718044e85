"""
The app's Lambda function on the table's stream: it counts the bookmarks into their posts' ``bookmark_count``,
whoever wrote them (the app's ``PUT /posts/<post_id>/bookmarks/<user_id>``, or another service writing the items
itself), exactly once each, however Lambda delivers the records.

Deploy it with the handler ``flask_likes.stream.handler`` and an event source mapping on the table's stream with
``ReportBatchItemFailures`` (the library's stream-counting guide has the settings and IAM policy). It builds the
models from the same ``FLASK_*`` environment variables as the app, once per Lambda container.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from pynamodb_counters.streams import StreamResult, count_stream

from .models import LikeModels

__all__ = ["handler", "stream_handler"]

Handler = Callable[[Mapping[str, Any], Any], StreamResult]
_handler: Optional[Handler] = None


def stream_handler(models: LikeModels) -> Handler:
    """The function counting ``models``' bookmarks from a Lambda event of the table's stream; it returns Lambda's
    partial batch response (``{"batchItemFailures": [...]}``)."""

    def handle(event: Mapping[str, Any], context: Any = None) -> StreamResult:
        return count_stream(event, models=[models.bookmark])

    return handle


def handler(event: Mapping[str, Any], context: Any) -> StreamResult:
    """The Lambda entry point: :func:`stream_handler` of the models of an app built from the environment."""
    global _handler
    if _handler is None:
        from . import create_app

        _handler = stream_handler(create_app().extensions["likes_models"])
    return _handler(event, context)
