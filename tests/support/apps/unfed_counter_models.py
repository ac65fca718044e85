"""A post with a counter that no relation feeds (``myapp/models.py`` of an app run by the console script)."""
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin


class Post(CounterMixin, Model):
    class Meta:
        table_name = "Posts"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    like_tally = CounterField()
