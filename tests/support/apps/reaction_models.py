"""Reactions, a second module feeding the blog's ``Post.like_tally``: ``app/reactions.py`` beside
``app/posts.py`` (:file:`blog_models.py`)."""
from app.posts import Post
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterMixin, counted_by


class Reaction(CounterMixin, Model):
    class Meta:
        table_name = "Blog"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    post = counted_by(Post.like_tally, key=lambda reaction: (reaction.pk, "META"), prefix="REACTION#")
