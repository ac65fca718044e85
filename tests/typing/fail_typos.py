"""Mistakes a user's mypy must catch (each line ends with the error mypy reports)."""
from __future__ import annotations

from pass_models import Like, Post

from pynamodb_counters import counted_by


def mistakes(post: Post, like: Like) -> None:
    Like.postt  # E: "type[Like]" has no attribute "postt"
    post.like_tally = "many"  # E: Incompatible types in assignment
    counted_by(Post.like_tally)  # E: Missing named argument "key" for "counted_by"
    Post.view_count.total(post) + "views"  # E: Unsupported operand types for + ("int" and "str")
