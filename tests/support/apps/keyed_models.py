"""Parents keyed by a number, by bytes and by a date, each counting a child through ``children=`` (2 children
each); ``Dated.broken`` is counted by a function that raises."""
import datetime
import inspect

from pynamodb.attributes import BinaryAttribute, NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by


def fail(key):
    raise RuntimeError("the children function broke")


# PynamoDB 6 asks binary attributes to choose their encoding; PynamoDB 5.5 has one
BINARY = {"legacy_encoding": False} if "legacy_encoding" in inspect.signature(BinaryAttribute).parameters else {}


class Numbered(CounterMixin, Model):
    class Meta:
        table_name = "Numbered"
        region = "us-east-1"

    n = NumberAttribute(hash_key=True)
    tally = CounterField()


class Binary(CounterMixin, Model):
    class Meta:
        table_name = "Binary"
        region = "us-east-1"

    b = BinaryAttribute(hash_key=True, **BINARY)
    tally = CounterField()


class Dated(CounterMixin, Model):
    class Meta:
        table_name = "Dated"
        region = "us-east-1"

    name = UnicodeAttribute(hash_key=True)
    at = UTCDateTimeAttribute(range_key=True)
    tally = CounterField()
    broken = CounterField()


class Child(CounterMixin, Model):
    class Meta:
        table_name = "Children"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    numbered = counted_by(Numbered.tally, key=lambda c: 7, children=lambda key: 2)
    binary = counted_by(Binary.tally, key=lambda c: b"\x00\xff", children=lambda key: 2)
    dated = counted_by(Dated.tally, key=lambda c: ("d", datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)),
                       children=lambda key: 2)
    broken = counted_by(Dated.broken, key=lambda c: ("d", datetime.datetime(2024, 1, 2,
                        tzinfo=datetime.timezone.utc)), children=fail)
