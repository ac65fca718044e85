"""Declarations that would miscount are refused when they are made, registering nothing."""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Iterator

import pytest
from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, counted_by
from pynamodb_counters._spec import feeders_of
from pynamodb_counters.exceptions import ConfigurationError
from tests.factories import snapshot
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


# -- two child models, one table, overlapping prefixes -----------------------------------------------------------
def social(table: str, name: str = "Page") -> Any:
    """A parent model ``name`` of its own (in table ``table``) with two counters."""
    meta = type("Meta", (), {"table_name": table, "region": REGION})
    namespace = {"Meta": meta, "pk": UnicodeAttribute(hash_key=True), "sk": UnicodeAttribute(range_key=True),
                 "like_tally": CounterField(), "reaction_count": CounterField(), "__qualname__": name,
                 "__module__": __name__}
    return type(name, (CounterMixin, Model), namespace)


def child(page: Any, name: str, prefix: str, counter: str = "like_tally", table: str = "") -> Any:
    """A child model ``name`` of ``page`` in ``page``'s table (or ``table``), counted under ``prefix``."""
    meta = type("Meta", (), {"table_name": table or page.Meta.table_name, "region": REGION})
    namespace = {"Meta": meta, "pk": UnicodeAttribute(hash_key=True), "sk": UnicodeAttribute(range_key=True),
                 "page": counted_by(getattr(page, counter), key=lambda c: (c.pk, "META"), prefix=prefix),
                 "__qualname__": name, "__module__": __name__}
    return type(name, (CounterMixin, Model), namespace)


@pytest.mark.parametrize("first, second, counter", [
    ("LIKE#", "LIKE#", "like_tally"),
    ("LIKE#", "LIKE#USER#", "like_tally"),
    ("LIKE#USER#", "LIKE#", "reaction_count"),
])
def test_a_second_child_model_in_the_same_table_under_an_overlapping_prefix_is_refused(
        first: str, second: str, counter: str) -> None:
    page = social("Overlap")
    like = child(page, "Like", first)
    before = snapshot()
    with refused(rf"Reaction.page .*prefix='{second}'.*Like.page .*prefix='{first}'.* table Overlap.*"
                 r"distinct prefixes.*DiscriminatorAttribute.*children="):
        child(page, "Reaction", second, counter)
    assert feeders_of(getattr(page, counter)) == ((like.page,) if counter == "like_tally" else ())
    assert snapshot() == before  # a declaration does no I/O


def test_a_child_model_refused_in_its_class_body_registers_none_of_its_relations() -> None:
    pages = social("Withdrawn")
    like = child(pages, "Like", "LIKE#")
    with refused("Reaction.page .*prefix='LIKE#'"):
        class Reaction(CounterMixin, Model):
            class Meta:
                table_name = "Withdrawn"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)
            counted = counted_by(pages.reaction_count, key=lambda r: (r.pk, "META"), prefix="REACTION#")
            page = counted_by(pages.like_tally, key=lambda r: (r.pk, "META"), prefix="LIKE#")
    assert feeders_of(pages.like_tally) == (like.page,) and feeders_of(pages.reaction_count) == ()


def test_children_that_an_audit_can_tell_apart_are_not_refused() -> None:
    pages = social("Apart")
    like = child(pages, "Like", "LIKE#")
    assert child(pages, "Like", "LIKE#") is not like  # the same model class loaded twice (a re-import, a factory)
    child(pages, "Reaction", "REACTION#")  # distinct prefixes
    child(pages, "Echo", "LIKE#", table="Elsewhere")  # another table
    child(social("Apart", "Profile"), "Mention", "LIKE#")  # another parent model: other partitions

    class Sub(like):  # type: ignore[misc, valid-type]  # inherits its base's relation: the same items
        extra = counted_by(pages.reaction_count, key=lambda s: (s.pk, "META"), prefix="SUB#")

    class Vote(CounterMixin, Model):  # two relations of one child model count the same items
        class Meta:
            table_name = "Apart"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        value = NumberAttribute()
        up = counted_by(pages.like_tally, key=lambda v: (v.pk, "META"), when=lambda v: v.value > 0, prefix="VOTE#")
        down = counted_by(pages.reaction_count, key=lambda v: (v.pk, "META"), when=lambda v: v.value < 0,
                          prefix="VOTE#")

    class Item(CounterMixin, Model):  # one discriminator: an audit filters by class
        class Meta:
            table_name = "Apart"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        kind = DiscriminatorAttribute()

    class Clap(Item, discriminator="Clap"):
        page = counted_by(pages.like_tally, key=lambda c: (c.pk, "META"), prefix="HIT#")

    class Cheer(Item, discriminator="Cheer"):
        page = counted_by(pages.reaction_count, key=lambda c: (c.pk, "META"), prefix="HIT#")

    assert Vote.up.prefix == Vote.down.prefix and Clap.page.prefix == Cheer.page.prefix == "HIT#"
    assert Sub.extra.child_model is Sub


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
