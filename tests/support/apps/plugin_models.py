"""A user's models, as the suites that the pytest plugin runs in a subprocess import them (``app_models``)."""
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


class Post(CounterMixin, Model):
    class Meta:
        table_name = "PluginSocial"
        region = "us-east-1"
    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    like_tally = CounterField()

    @classmethod
    def audit_filter(cls):
        return cls.sk == "META"


class Like(CounterMixin, Model):
    class Meta:
        table_name = "PluginSocial"
        region = "us-east-1"
    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    liked_at = NumberAttribute()
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")
