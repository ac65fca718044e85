"""A blog's posts and their likes, as an app's ``app/posts.py`` declares them (the tests copy this file into a
package of their own in ``tmp_path``)."""
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Blog"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    title = UnicodeAttribute(null=True)
    like_tally = CounterField()

    @classmethod
    def audit_filter(cls):
        return cls.sk == "META"


class Like(CounterMixin, Model):
    class Meta:
        table_name = "Blog"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")
