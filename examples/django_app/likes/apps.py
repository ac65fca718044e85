"""The app's configuration: connects its Django receivers when Django starts."""
from __future__ import annotations

from django.apps import AppConfig


class LikesConfig(AppConfig):
    """Likes on DynamoDB."""

    name = "likes"

    def ready(self) -> None:
        """Connect the cache receivers to :data:`likes.signals.like_added`, ``like_removed`` and
        ``comment_counts_changed``."""
        from . import receivers  # noqa: F401  (connects on import)
