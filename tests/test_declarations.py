"""Declarations: a relation declared after its class body registers like one declared in it, and declarations
that would miscount are refused when they are made (or, after a class body, at first use), registering nothing."""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Iterator, List

import pytest
from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, audit, counted_by, skip_counting
from pynamodb_counters.declare._spec import feeders_of
from pynamodb_counters.exceptions import ConfigurationError
from tests.support.factories import raw_client, snapshot
from tests.support.models import REGION

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


def stored_feeds(model: Any, *key: str) -> List[str]:
    """The feeder entries the item at ``key`` of ``model``'s table records (``_cfeed``)."""
    hash_name = model._hash_keyname
    item = raw_client(None).get_item(TableName=model.Meta.table_name, Key={hash_name: {"S": key[0]}},
                                     ConsistentRead=True)["Item"]
    return sorted(item.get("_cfeed", {}).get("SS", []))


# -- trees: a model counting its own kind ------------------------------------------------------------------------
class Category(CounterMixin, Model):
    """A tree: a category counts its subcategories. The relation names the model's own counter, so it is assigned
    after the class body (the other form, in the body, is in a test below)."""

    class Meta:
        table_name = "Categories"
        region = REGION

    pk = UnicodeAttribute(hash_key=True)
    parent_id = UnicodeAttribute(null=True)
    subcategories = CounterField()


def subcategories_of(pk: str) -> int:
    return sum(1 for _ in Category.scan(Category.parent_id == pk, consistent_read=True))


Category.parent = counted_by(  # type: ignore[attr-defined]
    Category.subcategories, key=lambda c: c.parent_id, when=lambda c: c.parent_id is not None,
    children=lambda key: subcategories_of(key[0]))


def test_a_tree_relation_assigned_after_the_class_body_counts_audits_and_names_itself() -> None:
    Category.create_table(billing_mode="PAY_PER_REQUEST")
    Category(pk="root").save()
    Category(pk="a", parent_id="root").save()
    Category(pk="b", parent_id="a").save()
    Category(pk="c", parent_id="a").save()
    assert Category.get("root", consistent_read=True).subcategories == 1
    assert Category.get("a", consistent_read=True).subcategories == 2

    relation = Category.parent  # type: ignore[attr-defined]
    assert relation.child_model is Category and relation.name == "parent"
    assert repr(relation) == "<Relation Category.parent -> Category.subcategories>"
    assert relation in feeders_of(Category.subcategories)
    assert relation.feeder_entry != ""  # never an empty entry
    assert stored_feeds(Category, "a") == [relation.feeder_entry]

    report = audit(Category.subcategories)
    assert report.parents_checked == 4 and report.drifts == ()
    with skip_counting():
        Category(pk="d", parent_id="a").save()  # behind the counter's back
    assert [(d.key, d.stored, d.actual) for d in audit(Category.subcategories).drifts] == [(("a",), 2, 3)]


def tree_model(table: str) -> Any:
    """A tree model of its own (in table ``table``), with no relation yet: a test assigns one."""

    class Shelf(CounterMixin, Model):
        class Meta:
            table_name = table
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        parent_id = UnicodeAttribute(null=True)
        shelves = CounterField()

    return Shelf


def test_a_tree_relation_declared_in_the_class_body_on_a_counter_declared_before_it_counts() -> None:
    class Folder(CounterMixin, Model):
        class Meta:
            table_name = "Folders"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        parent_id = UnicodeAttribute(null=True)
        subfolders = CounterField()
        parent = counted_by(subfolders, key=lambda f: f.parent_id, when=lambda f: f.parent_id is not None,
                            children=lambda key: sum(1 for _ in Folder.scan(Folder.parent_id == key[0],
                                                                            consistent_read=True)))

    Folder.create_table(billing_mode="PAY_PER_REQUEST")
    Folder(pk="root").save()
    Folder(pk="a", parent_id="root").save()
    Folder(pk="b", parent_id="root").save()
    assert Folder.get("root", consistent_read=True).subfolders == 2
    assert Folder.parent.child_model is Folder and Folder.parent.parent_model is Folder
    assert repr(Folder.parent) == "<Relation Folder.parent -> Folder.subfolders>"
    assert audit(Folder.subfolders).drifts == ()


def test_a_tree_relation_in_the_class_body_is_checked_as_its_class_is_made() -> None:
    with refused("a sharded counter needs a string hash key"):
        class Numbered(CounterMixin, Model):
            class Meta:
                table_name = "Numbered"
                region = REGION

            n = NumberAttribute(hash_key=True)
            parent_n = NumberAttribute(null=True)
            below = CounterField(shards=4)
            parent = counted_by(below, key=lambda x: x.parent_n)

    loose = CounterField()
    with refused(r"Loose.parent = counted_by\(\.\.\.\): its CounterField is not declared on a model class.*"
                 r"in its class body, before the relation"):
        class Loose(CounterMixin, Model):
            class Meta:
                table_name = "Loose"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            parent = counted_by(loose, key=lambda x: x.pk)
            count = loose


def test_a_relation_assigned_after_its_model_was_first_used_counts_from_then_on() -> None:
    Shelf = tree_model("ShelvesUsed")
    Shelf.create_table(billing_mode="PAY_PER_REQUEST")
    Shelf(pk="root").save()  # the model is used (its declarations read) before the relation exists
    Shelf.parent = counted_by(Shelf.shelves, key=lambda s: s.parent_id, when=lambda s: s.parent_id is not None)
    Shelf(pk="a", parent_id="root").save()
    assert Shelf.get("root", consistent_read=True).shelves == 1
    assert stored_feeds(Shelf, "root") == [Shelf.parent.feeder_entry] and Shelf.parent.name == "parent"


def test_a_relation_assigned_after_the_class_body_that_cannot_be_registered_is_refused_and_never_counts() -> None:
    Shelf = tree_model("ShelvesRefused")
    Shelf.create_table(billing_mode="PAY_PER_REQUEST")
    Shelf(pk="root").save()
    Shelf.parent = counted_by(Shelf.shelves, key=lambda s: s.parent_id, when=lambda s: s.parent_id is not None)
    Shelf.again = counted_by(Shelf.shelves, key=lambda s: s.parent_id, when=lambda s: s.parent_id is not None)
    before = snapshot(), raw_client(None).scan(TableName="ShelvesRefused")["Items"]
    with refused("Shelf.again and Shelf.parent both count .* the same key"):
        Shelf(pk="a", parent_id="root").save()
    assert (snapshot(), raw_client(None).scan(TableName="ShelvesRefused")["Items"]) == before
    with refused("Shelf.again and Shelf.parent both count"):
        Shelf.again  # noqa: B018  # first access registers, or refuses
    with refused("Shelf.again and Shelf.parent both count"):
        audit(Shelf.shelves)
    del Shelf.again
    Shelf(pk="a", parent_id="root").save()
    assert Shelf.get("root", consistent_read=True).shelves == 1


def test_one_relation_assigned_under_a_second_name_is_refused_at_first_use() -> None:
    Shelf = tree_model("ShelvesAliased")
    Shelf.create_table(billing_mode="PAY_PER_REQUEST")
    Shelf.parent = counted_by(Shelf.shelves, key=lambda s: s.parent_id, when=lambda s: s.parent_id is not None)
    Shelf.alias = Shelf.parent
    before = raw_client(None).scan(TableName="ShelvesAliased")["Items"]
    with refused(r"one relation cannot be declared twice \(<Relation Shelf.parent -> Shelf.shelves> and "
                 r"Shelf.alias\)"):
        Shelf(pk="root").save()
    assert raw_client(None).scan(TableName="ShelvesAliased")["Items"] == before
    del Shelf.alias


def test_a_relation_assigned_to_a_model_without_the_mixin_is_refused_when_read() -> None:
    class Plain(Model):
        class Meta:
            table_name = "Plain"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        parent_id = UnicodeAttribute(null=True)

    shelf = tree_model("ShelvesPlain")
    Plain.parent = counted_by(shelf.shelves, key=lambda p: p.parent_id)  # type: ignore[attr-defined]
    with refused("Plain must list CounterMixin before Model"):
        Plain.parent  # type: ignore[attr-defined]  # noqa: B018
    assert feeders_of(shelf.shelves) == ()
    del Plain.parent  # type: ignore[attr-defined]


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
    with pytest.raises(ConfigurationError, match=r"(?s)non-empty sort key prefix such as 'LIKE#', not ''\n.*children="):
        counted_by(account.transfer_count, key=lambda n: n.pk, prefix="")


# -- subclasses: every class that can be saved holds the rules, inherited relations included ---------------------
def test_a_subclass_adding_a_ttl_attribute_to_a_counted_child_is_refused_naming_its_inherited_relation() -> None:
    page = social("ExpiringNotes")

    class Note(CounterMixin, Model):
        class Meta:
            table_name = "ExpiringNotes"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        liked = counted_by(page.like_tally, key=lambda n: (n.pk, "META"), prefix="NOTE#")

    before = snapshot()
    with refused(r"\ATempNote inherits Note.liked = counted_by\(\.\.\.\) without expiries=, and TempNote.expires "
                 r"is a TTLAttribute\n.*Page.like_tally would stay high.*TTLAttribute on Note.*expiries='stream'"
                 r".*expiries='ignored'"):
        class TempNote(Note):
            expires = TTLAttribute(null=True)
            reacted = counted_by(page.reaction_count, key=lambda n: (n.pk, "META"),
                                 expiries="ignored")  # passes its own rules, and is withdrawn with its class

    assert feeders_of(page.like_tally) == (Note.liked,) and feeders_of(page.reaction_count) == ()
    assert snapshot() == before  # a declaration does no I/O


def test_a_ttl_subclass_of_a_child_whose_relation_is_assigned_after_its_body_is_refused_at_first_use() -> None:
    Shelf = tree_model("ShelvesExpiring")
    Shelf.create_table(billing_mode="PAY_PER_REQUEST")
    Shelf(pk="root").save()

    class Crate(Shelf):  # type: ignore[valid-type,misc]
        expires = TTLAttribute(null=True)

    Shelf.parent = counted_by(Shelf.shelves, key=lambda s: s.parent_id, when=lambda s: s.parent_id is not None)
    before = raw_client(None).scan(TableName="ShelvesExpiring")["Items"]
    with refused(r"\ACrate inherits Shelf.parent = counted_by\(\.\.\.\) without expiries=, and Crate.expires is a "
                 r"TTLAttribute\n"):
        Crate(pk="a", parent_id="root").save()
    assert raw_client(None).scan(TableName="ShelvesExpiring")["Items"] == before
    with refused("Crate inherits Shelf.parent"):  # refused at every use, and never counts
        Shelf(pk="b", parent_id="root").save()
    del Shelf.parent
    assert raw_client(None).scan(TableName="ShelvesExpiring")["Items"] == before


# -- the attribute names the library stores on items are its own ---------------------------------------------------
LIBRARY_NAMES = ["_cwid", "_ceid", "_cseq", "_cfeed", "_cshard", "_cshards", "_cexpiry"]


@pytest.mark.parametrize("name", LIBRARY_NAMES)
def test_a_child_attribute_stored_under_a_name_the_library_stores_is_refused(name: str) -> None:
    page = social(f"Reserved{name}")
    before = snapshot()
    with refused(rf"\ANote.origin is stored as '{name}', a name pynamodb-counters stores on items itself\n"
                 r".*another attr_name"):
        class Note(CounterMixin, Model):
            class Meta:
                table_name = f"Reserved{name}"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            sk = UnicodeAttribute(range_key=True)
            origin = UnicodeAttribute(attr_name=name, null=True)
            liked = counted_by(page.like_tally, key=lambda n: (n.pk, "META"), prefix="NOTE#")

    assert feeders_of(page.like_tally) == ()  # its relation is withdrawn with its class
    assert snapshot() == before


def test_the_library_names_are_refused_on_parents_counters_python_names_and_subclasses() -> None:
    before = snapshot()
    with refused(r"\AShop.sequence is stored as '_cseq', a name pynamodb-counters stores on items itself\n"):
        class Shop(CounterMixin, Model):
            class Meta:
                table_name = "ReservedShops"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            sales = CounterField()
            sequence = NumberAttribute(attr_name="_cseq", null=True)

    with refused(r"\AStall.sales is stored as '_cfeed'"):
        class Stall(CounterMixin, Model):
            class Meta:
                table_name = "ReservedShops"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            sales = CounterField(attr_name="_cfeed")

    with refused(r"\AKiosk._cwid is stored as '_cwid'"):
        class Kiosk(CounterMixin, Model):
            class Meta:
                table_name = "ReservedShops"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            sales = CounterField()
            _cwid = UnicodeAttribute(null=True)

    class Store(CounterMixin, Model):
        class Meta:
            table_name = "ReservedShops"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sales = CounterField()

    with refused(r"\AOutlet.branch is stored as '_cshards'"):
        class Outlet(Store):
            branch = NumberAttribute(attr_name="_cshards", null=True)

    with refused(r"\APlainStore.note is stored as '_cexpiry'"):  # a model with the mixin that counts nothing yet
        class PlainStore(CounterMixin, Model):
            class Meta:
                table_name = "ReservedShops"
                region = REGION

            pk = UnicodeAttribute(hash_key=True)
            note = UnicodeAttribute(attr_name="_cexpiry", null=True)

    class Cousin(CounterMixin, Model):  # names near the library's are the user's
        class Meta:
            table_name = "ReservedShops"
            region = REGION

        pk = UnicodeAttribute(hash_key=True)
        sales = CounterField(attr_name="_csales")
        seq = NumberAttribute(attr_name="cseq", null=True)

    assert Cousin.sales.attr_name == "_csales" and Store.sales.attr_name == "sales"
    assert snapshot() == before
