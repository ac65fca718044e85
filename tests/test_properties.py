"""Property-based tests: a hypothesis state machine drives counted writes on moto in-process and checks, after
every step, that DynamoDB holds exactly the counters and children a plain model predicts.

The model knows every child (likes, and bookmarks counted twice: on their post and on their user, in another
table) and every counter as stored. Counted writes move both; writes inside ``skip_counting()`` move only the
children, so between such a write and ``audit`` + ``repair`` the model expects that exact drift, and the audit
must report exactly it. Each example gets fresh tables (a moto in-process :class:`~pynamodb_counters.testing.Backend`
per example, as the ``dynamodb`` fixture gives each test).

A second property covers ``bulk_write``: with exact counters, each child is reported as its own counted write
would be (the pinned example is the case where a missing child's failed floor was once blamed on its siblings).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple, Type, Union

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pynamodb_counters import CountedTransaction, WriteResult, audit, bulk_write, repair, skip_counting
from pynamodb_counters.exceptions import (
    CountedWriteError,
    CounterUnderflowError,
    DuplicateChildError,
    MissingChildError,
    ParentNotFoundError,
)
from pynamodb_counters.testing import Backend
from tests.support.factories import stored
from tests.support.models import TABLE_MODELS, Bookmark, Like, Post, User

pytestmark = pytest.mark.slow

POSTS = ("POST#p0", "POST#p1", "POST#p2")
USERS = ("USER#u0", "USER#u1", "USER#u2")
MISSING_POST = "POST#gone"  # never created

Child = Union[Like, Bookmark]
ChildKey = Tuple[str, str, str]  # (kind, post, user)
CounterKey = Tuple[str, str]  # (counter, parent): ("like_tally", post), ("bookmark_count", post), ("bookmarks", user)

kinds = st.sampled_from(("like", "bookmark"))
posts = st.sampled_from(POSTS)
users = st.sampled_from(USERS)
children = st.tuples(kinds, posts, users)


def instance(key: ChildKey) -> Child:
    kind, post, user = key
    if kind == "like":
        return Like(pk=post, sk=f"LIKE#{user}", liked_at=1750636800)
    return Bookmark(pk=post, sk=f"BOOKMARK#{user}", user_id=user)


def counters_of(key: ChildKey) -> List[CounterKey]:
    kind, post, user = key
    return [("like_tally", post)] if kind == "like" else [("bookmark_count", post), ("bookmarks", user)]


class CountedWrites(RuleBasedStateMachine):
    """Likes and bookmarks on three posts and three users, under counted and uncounted writes."""

    def __init__(self) -> None:
        super().__init__()
        self.backend = Backend("moto", TABLE_MODELS).__enter__()
        self.children: Set[ChildKey] = set()
        self.counters: Dict[CounterKey, int] = {}  # as stored
        self.tokens: Dict[ChildKey, str] = {}  # the token that put each child still stored by a counted save
        self.deleted: Dict[ChildKey, str] = {}  # the token of the last counted delete of each absent child
        self.loaded: Dict[str, Post] = {}  # copies of posts loaded earlier, going stale

    def teardown(self) -> None:
        self.backend.__exit__(None, None, None)

    @initialize()
    def parents(self) -> None:
        for post in POSTS:
            Post(pk=post, sk="META", title="first").save()
            self.counters[("like_tally", post)] = self.counters[("bookmark_count", post)] = 0
        for user in USERS:
            User(user_id=user).save()
            self.counters[("bookmarks", user)] = 0

    # -- the model ----------------------------------------------------------------------------------------------
    def actual(self, counter: CounterKey) -> int:
        name, parent = counter
        if name == "like_tally":
            return sum(1 for kind, post, _ in self.children if kind == "like" and post == parent)
        if name == "bookmark_count":
            return sum(1 for kind, post, _ in self.children if kind == "bookmark" and post == parent)
        return sum(1 for kind, _, user in self.children if kind == "bookmark" and user == parent)

    def drifted(self) -> Dict[CounterKey, Tuple[int, int]]:
        return {counter: (value, self.actual(counter)) for counter, value in self.counters.items()
                if value != self.actual(counter)}

    def expected_error(self, operations: List[Tuple[ChildKey, str]]) -> Optional[Type[CountedWriteError]]:
        """What one counted transaction must raise, in the library's order of precedence."""
        if any(action == "save" and key in self.children for key, action in operations):
            return DuplicateChildError
        if any(action == "delete" and key not in self.children for key, action in operations):
            return MissingChildError
        net: Dict[CounterKey, int] = {}
        for key, action in operations:
            for counter in counters_of(key):
                net[counter] = net.get(counter, 0) + (1 if action == "save" else -1)
        if any(delta < 0 and self.counters[counter] + delta < 0 for counter, delta in net.items()):
            return CounterUnderflowError
        return None

    def apply(self, operations: List[Tuple[ChildKey, str]], result: WriteResult) -> None:
        for key, action in operations:
            for counter in counters_of(key):
                self.counters[counter] += 1 if action == "save" else -1
            if action == "save":
                self.children.add(key)
                self.tokens[key] = result.token
                self.deleted.pop(key, None)
            else:
                self.children.discard(key)
                self.tokens.pop(key, None)
                self.deleted[key] = result.token

    def write(self, operations: List[Tuple[ChildKey, str]]) -> None:
        """One counted transaction (a plain save or delete when it holds one child), checked against the model."""
        expected = self.expected_error(operations)
        event(f"{'transaction' if len(operations) > 1 else operations[0][1]}: "
              f"{expected.__name__ if expected else 'done'}")
        before = snapshot_all()
        try:
            if len(operations) == 1:
                (key, action), = operations
                result = instance(key).save() if action == "save" else instance(key).delete()
            else:
                transaction = CountedTransaction()
                for key, action in operations:
                    if action == "save":
                        transaction.save(instance(key))
                    else:
                        transaction.delete(instance(key))
                result = transaction.commit()
        except CountedWriteError as error:
            assert expected is not None and type(error) is expected, (operations, error)
            assert snapshot_all() == before  # a refused write leaves every table as it was
            return
        assert expected is None, (operations, result)
        assert not result.recovered and not result.duplicate and not result.missing
        self.apply(operations, result)
        for key, action in operations:
            if action == "save":
                assert raw_child(key)["_cwid"] == {"S": result.token}  # the write id the retries rely on

    # -- rules --------------------------------------------------------------------------------------------------
    @rule(key=children)
    def save(self, key: ChildKey) -> None:
        """A like or bookmark; a duplicate when it is already stored."""
        self.write([(key, "save")])

    @rule(key=children)
    def delete(self, key: ChildKey) -> None:
        """An unlike, of any child: a missing child when it is absent."""
        self.write([(key, "delete")])

    @precondition(lambda self: bool(self.children))
    @rule(data=st.data())
    def delete_a_stored_child(self, data: st.DataObject) -> None:
        """An unlike of a stored child; an underflow when a write around the library left its counter at zero."""
        self.write([(data.draw(st.sampled_from(sorted(self.children))), "delete")])

    @rule(keys=st.lists(children, min_size=2, max_size=5, unique=True),
          flips=st.lists(st.integers(0, 7).map(lambda n: n == 7), min_size=5, max_size=5))
    def transaction(self, keys: List[ChildKey], flips: List[bool]) -> None:
        """Several children in one CountedTransaction: all of it commits, or none. Each child is added when
        absent and removed when stored, unless flipped (a duplicate, or a missing child: the whole write is
        refused)."""
        self.write([(key, "delete" if (key in self.children) != flip else "save") for key, flip in zip(keys, flips)])

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data())
    def retry_a_save_with_its_token(self, data: st.DataObject) -> None:
        """A caller retries a save that had succeeded, with the same token: recognised as its own write."""
        key = data.draw(st.sampled_from(sorted(self.tokens)))
        before = snapshot_all()
        result = instance(key).save(token=self.tokens[key])
        assert result.recovered and result.token == self.tokens[key] and not result.duplicate
        assert snapshot_all() == before  # nothing counted twice
        with pytest.raises(DuplicateChildError):
            instance(key).save(token="another-write")  # another token: a real duplicate

    @precondition(lambda self: bool(self.deleted))
    @rule(data=st.data())
    def retry_a_delete_with_its_token(self, data: st.DataObject) -> None:
        """moto ignores tokens, so a delete retried in a later call meets the missing child (documented)."""
        key = data.draw(st.sampled_from(sorted(self.deleted)))
        before = snapshot_all()
        with pytest.raises(MissingChildError):
            instance(key).delete(token=self.deleted[key])
        assert instance(key).delete(token=self.deleted[key], ignore_missing=True).missing
        assert snapshot_all() == before

    @rule(kind=kinds, user=users)
    def write_on_a_missing_post(self, kind: str, user: str) -> None:
        before = snapshot_all()
        with pytest.raises(ParentNotFoundError):
            instance((kind, MISSING_POST, user)).save()
        assert snapshot_all() == before

    @rule(post=posts)
    def load_a_post(self, post: str) -> None:
        self.loaded[post] = Post.get(post, "META", consistent_read=True)

    @precondition(lambda self: bool(self.loaded))
    @rule(data=st.data(), title=st.text(alphabet="abc", min_size=1, max_size=5))
    def save_a_stale_post(self, data: st.DataObject, title: str) -> None:
        """A copy loaded before later likes, saved with a new title, keeps the stored counters."""
        post = data.draw(st.sampled_from(sorted(self.loaded)))
        stale = self.loaded[post]
        stale.title = title
        stale.save()
        fresh = Post.get(post, "META", consistent_read=True)
        assert fresh.title == title
        assert (stale.like_tally, stale.bookmark_count) == (fresh.like_tally, fresh.bookmark_count)

    @rule(keys=st.lists(children, min_size=1, max_size=3, unique=True))
    def write_without_counting(self, keys: List[ChildKey]) -> None:
        """A backfill or a hand edit: children come and go, their counters do not (the known drift)."""
        with skip_counting():
            for key in keys:
                if key in self.children:
                    instance(key).delete()
                    self.children.discard(key)
                    self.tokens.pop(key, None)
                else:
                    instance(key).save()
                    self.children.add(key)
                    self.deleted.pop(key, None)

    @rule()
    def audit_and_repair(self) -> None:
        """An audit reports exactly the drift the model knows of; a repair makes every counter exact."""
        drifts = [drift for counter in (Post.like_tally, Post.bookmark_count, User.bookmarks)
                  for drift in audit(counter).drifts]
        found = {(drift.attribute, drift.key[0]): (drift.stored, drift.actual) for drift in drifts}
        event(f"audit: {'drift' if found else 'exact'}")
        assert found == self.drifted()
        report = repair(drifts)
        assert report.complete and all(r.status == "repaired" for r in report.repairs)
        for counter in found:
            self.counters[counter] = self.actual(counter)
        assert not self.drifted()

    # -- after every step ---------------------------------------------------------------------------------------
    @invariant()
    def dynamodb_holds_what_the_model_predicts(self) -> None:
        if not self.counters:  # before the parents exist
            return
        held_children: Set[ChildKey] = set()
        held_counters: Dict[CounterKey, int] = {}
        for item in stored("Social"):
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if sk == "META":
                held_counters[("like_tally", pk)] = int(item["like_tally"]["N"])
                held_counters[("bookmark_count", pk)] = int(item["bookmarkCount"]["N"])
            elif sk.startswith("LIKE#"):
                held_children.add(("like", pk, sk[len("LIKE#"):]))
            else:
                assert sk.startswith("BOOKMARK#") and item["user_id"]["S"] == sk[len("BOOKMARK#"):]
                held_children.add(("bookmark", pk, item["user_id"]["S"]))
        for item in stored("Users"):
            held_counters[("bookmarks", item["user_id"]["S"])] = int(item["bookmarks"]["N"])
        assert held_children == self.children
        assert held_counters == self.counters  # so every counter equals its children, but for the known drift


def snapshot_all() -> Dict[str, List[Dict[str, Any]]]:
    return {table: sorted(stored(table), key=repr) for table in ("Social", "Users")}


def raw_child(key: ChildKey) -> Dict[str, Any]:
    kind, post, user = key
    sk = f"LIKE#{user}" if kind == "like" else f"BOOKMARK#{user}"
    (item,) = [item for item in stored("Social") if item["pk"]["S"] == post and item["sk"]["S"] == sk]
    return item


CountedWrites.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
test_counted_writes = CountedWrites.TestCase


# -- bulk writes --------------------------------------------------------------------------------------------------
Operation = Tuple[ChildKey, str]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(stored_children=[("like", "POST#p0", "USER#u0")],
         operations=[(("like", "POST#p0", "USER#u0"), "delete"), (("like", "POST#p0", "USER#u1"), "delete")],
         max_actions=100)
@given(stored_children=st.lists(children, max_size=6, unique=True),
       operations=st.lists(st.tuples(children, st.sampled_from(("save", "delete"))), min_size=1, max_size=8,
                           unique_by=lambda operation: operation[0]),
       max_actions=st.sampled_from((4, 100)))
def test_bulk_writes_report_each_child_as_its_own_write_would(stored_children: List[ChildKey],
                                                              operations: List[Operation],
                                                              max_actions: int) -> None:
    """With exact counters, ``bulk_write`` adds every absent child it saves and removes every stored child it
    deletes; it rejects exactly the duplicates and the missing children; the counters stay exact."""
    with Backend("moto", TABLE_MODELS):
        for post in POSTS:
            Post(pk=post, sk="META").save()
        for user in USERS:
            User(user_id=user).save()
        for key in stored_children:
            instance(key).save()
        instances = [instance(key) for key, _ in operations]
        result = bulk_write(saves=[i for i, (_, action) in zip(instances, operations) if action == "save"],
                            deletes=[i for i, (_, action) in zip(instances, operations) if action == "delete"],
                            max_actions=max_actions)
        outcomes = {id(outcome.instance): outcome for outcome in result.outcomes}
        reported = {key: (outcomes[id(child)].status, outcomes[id(child)].error)
                    for child, (key, _) in zip(instances, operations)}
        for key, action in operations:
            status, error = reported[key]
            if action == "save" and key in stored_children:
                assert status == "rejected" and isinstance(error, DuplicateChildError), (key, status, error)
            elif action == "delete" and key not in stored_children:
                assert status == "rejected" and isinstance(error, MissingChildError), (key, status, error)
            else:
                assert status == ("added" if action == "save" else "removed"), (key, status, error)
        assert [drift for counter in (Post.like_tally, Post.bookmark_count, User.bookmarks)
                for drift in audit(counter).drifts] == []
