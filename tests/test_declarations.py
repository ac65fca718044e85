"""Declarations that would miscount are refused when they are made, registering nothing."""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Iterator

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from pynamodb_counters._spec import feeders_of
from pynamodb_counters.exceptions import ConfigurationError
from tests.models import REGION

pytestmark = pytest.mark.usefixtures("dynamodb")


@contextlib.contextmanager
def refused(match: str) -> Iterator[None]:
    """A declaration refused with a :exc:`ConfigurationError` whose message matches ``match`` (Python before 3.12
    wraps an error raised in ``__set_name__`` in a ``RuntimeError``; ours is then its cause)."""
    with pytest.raises((ConfigurationError, RuntimeError)) as caught:
        yield
    error = caught.value.__cause__ if isinstance(caught.value, RuntimeError) else caught.value
    assert isinstance(error, ConfigurationError), caught.value
    assert re.search(match, str(error), re.S), str(error)


# -- one child, one counter, twice --------------------------------------------------------------------------------
def bank(table: str) -> Any:
    class Account(CounterMixin, Model):
        class Meta:
            table_name = table
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        transfer_count = CounterField()
        volume = CounterField()

    return Account


def test_two_relations_of_one_child_to_one_counter_with_the_same_key_are_refused() -> None:
    account = bank("Accounts")
    with refused(r"Transfer.copy and Transfer.sender both count each Transfer in .*transfer_count.* the same "
                 r"key.*add 2.*Remove one.*sender.*recipient"):
        class Transfer(CounterMixin, Model):
            class Meta:
                table_name = "Transfers"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            sender_id = UnicodeAttribute()
            sender = counted_by(account.transfer_count, key=lambda t: t.sender_id)
            copy = counted_by(account.transfer_count, key=lambda t: t.sender_id)

    def key(t: Any) -> Any:
        return t.sender

    with refused("Twice.second and Twice.first both count"):  # the same function
        class Twice(CounterMixin, Model):
            class Meta:
                table_name = "Transfers"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            first = counted_by(account.volume, key=key, amount=lambda t: t.amount)
            second = counted_by(account.volume, key=key, amount=lambda t: t.amount)

    class Base(CounterMixin, Model):
        class Meta:
            table_name = "Transfers"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sender_id = UnicodeAttribute()
        sent = counted_by(account.transfer_count, key=lambda t: t.sender_id)

    with refused("Copied.again and Base.sent both count"):  # inherited, then declared again
        class Copied(Base):
            again = counted_by(account.transfer_count, key=lambda t: t.sender_id)

    def attribute_key(name: str) -> Callable[[Any], Any]:
        return lambda t: getattr(t, name)

    with refused("Closed.second and Closed.first both count"):  # the same code over the same closure
        class Closed(CounterMixin, Model):
            class Meta:
                table_name = "Transfers"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            first = counted_by(account.volume, key=attribute_key("sender"))
            second = counted_by(account.volume, key=attribute_key("sender"))

    assert feeders_of(account.transfer_count) == (Base.sent,) and feeders_of(account.volume) == ()


def test_a_child_naming_one_parent_twice_through_two_keys_counts_there_twice() -> None:
    account = bank("Ledger")

    def attribute_key(name: str) -> Callable[[Any], Any]:
        return lambda t: getattr(t, name)

    class Transfer(CounterMixin, Model):
        class Meta:
            table_name = "Transfers"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sender_id = UnicodeAttribute()
        recipient_id = UnicodeAttribute()
        amount = NumberAttribute()
        sender = counted_by(account.transfer_count, key=lambda t: t.sender_id)
        recipient = counted_by(account.transfer_count, key=lambda t: t.recipient_id)
        sent = counted_by(account.volume, key=attribute_key("sender_id"), amount=lambda t: int(t.amount))
        received = counted_by(account.volume, key=attribute_key("recipient_id"), amount=lambda t: int(t.amount))
        # the same key with another when= counts something else: not a slip
        large = counted_by(account.transfer_count, key=lambda t: t.sender_id, when=lambda t: t.amount >= 100)

    account.create_table(billing_mode="PAY_PER_REQUEST")
    Transfer.create_table(billing_mode="PAY_PER_REQUEST")
    account(pk="A").save()
    account(pk="B").save()
    Transfer(pk="t1", sender_id="A", recipient_id="B", amount=5).save()
    Transfer(pk="t2", sender_id="A", recipient_id="A", amount=7).save()  # to oneself: sender and recipient
    assert account.get("A", consistent_read=True).transfer_count == 3  # t1 as sender, t2 twice
    assert account.get("B", consistent_read=True).transfer_count == 1
    assert account.get("A", consistent_read=True).volume == 5 + 7 + 7
    Transfer.get("t2").update(actions=[Transfer.recipient_id.set("B")])  # one of its two counts moves
    assert [account.get(pk, consistent_read=True).transfer_count for pk in ("A", "B")] == [2, 2]
    Transfer.get("t2").delete()
    assert [account.get(pk, consistent_read=True).transfer_count for pk in ("A", "B")] == [1, 1]


# -- prefix= ------------------------------------------------------------------------------------------------------
def test_a_prefix_on_a_child_model_without_a_range_key_is_refused_at_declaration() -> None:
    accounts = bank("NoRange")
    with refused(r"Note.account = counted_by\(\.\.\., prefix='NOTE#'\).*Note has no range key.*range_key=True.*"
                 r"children="):
        class Note(CounterMixin, Model):
            class Meta:
                table_name = "Notes"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            account = counted_by(accounts.transfer_count, key=lambda n: n.pk, prefix="NOTE#")

    class Keyed(CounterMixin, Model):  # a range key inherited from a base is a range key
        class Meta:
            table_name = "Notes"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)

    class Memo(Keyed):
        account = counted_by(accounts.transfer_count, key=lambda n: n.pk, prefix="MEMO#")

    assert feeders_of(accounts.transfer_count) == (Memo.account,)


def test_an_empty_prefix_is_refused_with_the_way_to_count_children_outside_a_prefix() -> None:
    account = bank("EmptyPrefix")
    with pytest.raises(ConfigurationError, match=r"non-empty sort key prefix such as 'LIKE#', not ''.*children="):
        counted_by(account.transfer_count, key=lambda n: n.pk, prefix="")
