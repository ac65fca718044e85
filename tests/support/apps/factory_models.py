"""Posts, likes and comments declared by a factory function, ``build(table)``: the tests run this source under
another ``__name__`` (``__main__``, a renamed module) to declare the same models again."""
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


def build(table):
    class Post(CounterMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        like_tally = CounterField()
        comment_count = CounterField()

        @classmethod
        def audit_filter(cls):
            return cls.sk == "META"

    class Like(CounterMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")

    class Comment(CounterMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)  # COMMENT#c1: its own partition
        sk = UnicodeAttribute(range_key=True)
        post_id = UnicodeAttribute()
        post = counted_by(Post.comment_count, key=lambda c: (c.post_id, "META"),
                          children=lambda key: sum(1 for c in Comment.scan(Comment.post_id == key[0],
                                                                            consistent_read=True)))

    return Post, Like, Comment
