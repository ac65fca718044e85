"""One counting rule: a counted write, an audit and a stream handler count a child by the same compiled rule
(``declare._counting_rule.CountingRule``), so they cannot disagree. Here: for children of every relation kind
(``when=``, ``amount=``, shards, a range-keyed parent, a rollup), the change a counted write makes and the change
an audit counts are equal, and so are their refusals."""
from __future__ import annotations

from typing import Any, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_counters.declare._counting_rule import CountingRule
from pynamodb_counters.exceptions import ChildValueError
from pynamodb_counters.write._deltas import change_of
from pynamodb_counters.write._writes import model_spec
from tests.support.models import Clap, Like, Message, View, Vote


def changes_both_ways(child: Any, sign: int) -> List[Any]:
    """Each relation of ``child``'s model: the change the write path makes, and the one the relation (what audits
    ask) gives."""
    found = []
    for spec in model_spec(type(child)).counting:
        written = change_of(spec, child, sign)
        audited = spec.relation.changes(child, sign)
        found.append((written, audited[0] if audited else None))
    return found


@settings(max_examples=60, deadline=None)
@given(status=st.sampled_from(["draft", "published"]), words=st.integers(-5, 500),
       deleted=st.one_of(st.none(), st.integers(1, 9)), thread=st.sampled_from(["THREAD#t1", "THREAD#t2"]),
       sign=st.sampled_from([1, -1]))
def test_a_message_counts_the_same_for_a_write_and_an_audit(status: str, words: int, deleted: Any, thread: str,
                                                           sign: int) -> None:
    message = Message(pk="MSG#m", sk="MSG", thread_id=thread, status=status, words=words, deleted_at=deleted)
    for written, audited in changes_both_ways(message, sign):
        assert written == audited


@settings(max_examples=40, deadline=None)
@given(user=st.text(alphabet="abcdef0123456789", min_size=1, max_size=8), value=st.integers(-3, 3))
def test_sharded_views_votes_likes_and_claps_count_the_same(user: str, value: int) -> None:
    for child in (View(pk="VIDEO#v", sk=f"VIEW#USER#{user}"), Vote(pk="THREAD#t", sk=f"VOTE#{user}", value=value),
                  Like(pk="POST#p", sk=f"LIKE#USER#{user}", liked_at=1),
                  Clap(pk="SHOW#s", sk=f"CLAP#USER#{user}", day="2026-12-07")):
        for written, audited in changes_both_ways(child, 1):
            assert written == audited


def test_a_refusal_is_the_same_for_a_write_and_an_audit() -> None:
    message = Message(pk="MSG#m", sk="MSG", thread_id="THREAD#t1", words="many")  # type: ignore[arg-type]
    refusals = []
    spec = next(spec for spec in model_spec(Message).counting if spec.relation.name == "words_on_thread")
    for count in (lambda: change_of(spec, message, 1), lambda: spec.relation.changes(message, 1)):
        with pytest.raises(ChildValueError) as caught:
            count()
        refusals.append(str(caught.value))
    assert refusals[0] == refusals[1] and "amount= returned" in refusals[0]


def test_the_write_path_and_the_relation_hold_one_compiled_rule_each() -> None:
    for spec in model_spec(Message).counting:
        assert isinstance(spec.rule, CountingRule) and isinstance(spec.relation._counting(), CountingRule)
        assert (spec.rule.key, spec.rule.when, spec.rule.amount) == spec.relation.functions
