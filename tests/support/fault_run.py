"""A fault-injection run against the served, serialised moto engine: the evidence behind ``docs/guarantees.rst``.

Several threads make counted writes on a few shared parents, through a :class:`~tests.support.faults.FaultProxy` that
loses responses after the engine committed, resets connections before sending, throttles, answers 5xx,
cancels with ``TransactionConflict`` and holds responses past the client's read timeout, on a seeded share of
the ``TransactWriteItems`` requests (and, through a second proxy in front of the parents' connections, of the
``UpdateItem`` requests that repairs and parent saves send).

Each thread owns a disjoint set of children (likes and bookmarks spread over every post and user), so its
history is sequential and it knows, before each operation, whether each of its children exists. Concurrency
comes from the shared parents: every counter is written by every thread. Per operation the thread records what
the library *reported* (a result, a rejection, or ``RetriesExhaustedError`` and its ``ambiguous`` flag) and
checks it against the truth, read back from the engine:

* a write reported done is done: its children are in their new state, and each child it put carries its token
  as write id;
* a write reported rejected, or failed without ambiguity, left its children as they were, and the rejection is
  the one the thread's own history predicts (no false duplicate, no false missing child);
* a write that failed ambiguously was applied whole or not at all; retried with the same token, a save is
  recognised as the caller's own (``recovered``), never reported as a duplicate;
* each child of a ``bulk_write`` is added, removed or rejected as the history predicts, and a transaction of it
  that failed ambiguously was applied whole or not at all;
* writes inside ``skip_counting()`` are followed by ``audit`` + ``repair`` of their parents while the other
  threads keep writing, until an audit proves the parent exact (the parent held still around its count: an
  audit's own proof, which the final checks hold it to).

One documented inference is counted rather than flagged: a delete of a child that did not exist, reported done
(``recovered``) because an earlier attempt of the same call was ambiguous (``absent_deletes_reported_done``).

After the run, with the faults off: every counter equals the children counted with a consistent Query (or
Scan), the stored children are exactly the ones the threads' histories predict, and a full audit finds no
drift.

``python -m tests.support.fault_run --operations 5000 --rate 0.3`` runs it outside pytest on its own engine and prints
a JSON summary; it exits with status 1 when an invariant was violated. ``tests/test_fault_run.py`` runs the CI
size.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Counter, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

# Dummy credentials before any client exists: the run talks to 127.0.0.1 only.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

import boto3  # noqa: E402
import botocore.config  # noqa: E402
from pynamodb.models import Model  # noqa: E402

from pynamodb_counters import (  # noqa: E402
    CountedTransaction,
    RetryPolicy,
    WriteResult,
    audit,
    bulk_write,
    repair,
    skip_counting,
)
from pynamodb_counters.exceptions import (  # noqa: E402
    CounterError,
    DuplicateChildError,
    MissingChildError,
    RetriesExhaustedError,
)
from pynamodb_counters.testing.server import ServedMoto  # noqa: E402
from tests.support import faults  # noqa: E402
from tests.support.faults import FaultProxy  # noqa: E402
from tests.support.models import ALL_MODELS, Bookmark, Like, Post, User, bookmarks_of  # noqa: E402

__all__ = ["RunConfig", "main", "run"]

SAVE, DELETE = "save", "delete"
TABLE = "Social"
LIKED_AT = 1750636800


@dataclass(frozen=True)
class RunConfig:
    """The size and the faults of one run.

    :ivar operations: counted operations in all (a transaction of several children counts once), split
      evenly over the threads.
    :ivar rate: the share of ``TransactWriteItems`` requests that get a fault.
    :ivar repair_rate: the share of the parents' ``UpdateItem`` requests (repairs, parent saves) that get one;
      ``None`` for half of ``rate``.
    :ivar read_timeout: the client's read timeout in seconds; a delay fault holds the response ``delay``
      seconds. It must stay well above the engine's queueing time, so that an attempt the client gave up on has
      reached the engine before the retry does, as it would on DynamoDB (which moreover honours the token).
    :ivar impatient: the share of operations made with a policy of 1 or 2 attempts, so that some exhaust their
      retries.
    """

    operations: int = 2000
    threads: int = 6
    rate: float = 0.2
    seed: int = 20260623
    repair_rate: Optional[float] = None
    posts: int = 3
    users: int = 2
    likes_per_post: int = 3
    bookmarks_per_post: int = 2
    read_timeout: float = 1.0
    delay: float = 1.6
    impatient: float = 0.4


ROUNDS = 100  # audits (and repairs) after one uncounted write, at most

PATIENT = RetryPolicy(max_attempts=12, base_delay=0.002, max_delay=0.05)
IMPATIENT = (RetryPolicy(max_attempts=1), RetryPolicy(max_attempts=2, base_delay=0.002, max_delay=0.01))

# -- children -------------------------------------------------------------------------------------------------
Child = Union[Like, Bookmark]


@dataclass(frozen=True)
class ChildRef:
    """One child a thread owns: a like or a bookmark, pinned to one post (and a bookmark to one user)."""

    kind: str
    pk: str
    sk: str
    user_id: str = ""

    def instance(self) -> Child:
        if self.kind == "like":
            return Like(pk=self.pk, sk=self.sk, liked_at=LIKED_AT)
        return Bookmark(pk=self.pk, sk=self.sk, user_id=self.user_id)

    @property
    def model(self) -> Type[Model]:
        return Like if self.kind == "like" else Bookmark

    @property
    def key(self) -> Tuple[str, str]:
        return (self.pk, self.sk)


@dataclass
class Tally:
    """Everything the threads recorded; merged at the end."""

    outcomes: Counter[str] = field(default_factory=collections.Counter)
    kinds: Counter[str] = field(default_factory=collections.Counter)
    retries: Counter[str] = field(default_factory=collections.Counter)
    skip: Counter[str] = field(default_factory=collections.Counter)
    bulk: Counter[str] = field(default_factory=collections.Counter)
    absent_deletes_done: Counter[str] = field(default_factory=collections.Counter)
    violations: List[str] = field(default_factory=list)

    def merge(self, other: Tally) -> None:
        self.outcomes.update(other.outcomes)
        self.kinds.update(other.kinds)
        self.retries.update(other.retries)
        self.skip.update(other.skip)
        self.bulk.update(other.bulk)
        self.absent_deletes_done.update(other.absent_deletes_done)
        self.violations.extend(other.violations)


class Truth:
    """Reads what the engine holds, straight from it (not through the proxies), strongly consistent."""

    def __init__(self, endpoint_url: str) -> None:
        self.client = boto3.client("dynamodb", endpoint_url=endpoint_url, region_name="us-east-1",
                                   config=botocore.config.Config(retries={"mode": "standard",
                                                                          "total_max_attempts": 5}))

    def child(self, ref: ChildRef) -> Optional[Dict[str, Any]]:
        item: Optional[Dict[str, Any]] = self.client.get_item(
            TableName=TABLE, Key={"pk": {"S": ref.pk}, "sk": {"S": ref.sk}}, ConsistentRead=True).get("Item")
        return item

    def scan(self, table: str) -> List[Dict[str, Any]]:
        pages = self.client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        return [item for page in pages for item in page["Items"]]


def state(applied: bool) -> str:
    return "ambiguous_applied" if applied else "ambiguous_not_applied"


# -- one thread -----------------------------------------------------------------------------------------------
Op = List[Tuple[ChildRef, str]]


class Worker:
    """One thread's sequential history over its own children."""

    def __init__(self, index: int, config: RunConfig, operations: int, truth: Truth,
                 posts: Sequence[Tuple[str, str]], users: Sequence[str]) -> None:
        self.index = index
        self.config = config
        self.operations = operations
        self.truth = truth
        self.posts = list(posts)
        self.rng = random.Random(config.seed * 1000 + index)
        self.children: List[ChildRef] = []
        for p, (pk, _) in enumerate(posts):
            for i in range(config.likes_per_post):
                self.children.append(ChildRef("like", pk, f"LIKE#T{index}#{p}.{i}"))
            for i in range(config.bookmarks_per_post):
                user = users[(index + p + i) % len(users)]
                self.children.append(ChildRef("bookmark", pk, f"BOOKMARK#T{index}#{p}.{i}", user))
        self.exists: Dict[ChildRef, bool] = {ref: False for ref in self.children}
        self.tally = Tally()
        self.stale: Optional[Post] = None

    # -- planning ---------------------------------------------------------------------------------------------
    def pick(self, present: bool) -> Optional[ChildRef]:
        candidates = [ref for ref in self.children if self.exists[ref] is present]
        return self.rng.choice(candidates) if candidates else None

    def next_op(self) -> Tuple[str, Op]:
        roll = self.rng.random()
        if roll < 0.30:
            kind, ref, action = "like", self.pick(False), SAVE
        elif roll < 0.55:
            kind, ref, action = "unlike", self.pick(True), DELETE
        elif roll < 0.63:
            kind, ref, action = "duplicate", self.pick(True), SAVE
        elif roll < 0.70:
            kind, ref, action = "delete_absent", self.pick(False), DELETE
        elif roll < 0.88:
            return self.batch()
        elif roll < 0.93:
            return self.bulk()
        elif roll < 0.97:
            return "skip_counting", []
        else:
            return "stale_parent_save", []
        if ref is None:  # nothing in the state this kind needs: flip a random child instead
            ref = self.rng.choice(self.children)
            kind, action = ("unlike", DELETE) if self.exists[ref] else ("like", SAVE)
        return kind, [(ref, action)]

    def batch(self) -> Tuple[str, Op]:
        refs = self.rng.sample(self.children, self.rng.randint(2, 4))
        op: Op = [(ref, DELETE if self.exists[ref] else SAVE) for ref in refs]
        if self.rng.random() < 0.25:  # one wrong child: a duplicate or an absent one; the whole batch is refused
            wrong = self.rng.randrange(len(op))
            ref, action = op[wrong]
            op[wrong] = (ref, SAVE if action == DELETE else DELETE)
            return "batch_refused", op
        return "batch", op

    def bulk(self) -> Tuple[str, Op]:
        """A bulk write: each child added when absent, removed when stored, or (one in five) the wrong way."""
        refs = self.rng.sample(self.children, self.rng.randint(3, 6))
        flip = [self.rng.random() < 0.2 for _ in refs]
        return "bulk", [(ref, SAVE if self.exists[ref] == wrong else DELETE) for ref, wrong in zip(refs, flip)]

    def expected_error(self, op: Op) -> Optional[Type[CounterError]]:
        """The rejection the thread's history predicts (``None``: the write must be done)."""
        duplicates = [ref for ref, action in op if action == SAVE and self.exists[ref]]
        missing = [ref for ref, action in op if action == DELETE and not self.exists[ref]]
        if duplicates:
            return DuplicateChildError
        if missing:
            return MissingChildError
        return None

    # -- running ----------------------------------------------------------------------------------------------
    def run(self) -> Tally:
        self.stale = Post.get(*self.posts[self.index % len(self.posts)], consistent_read=True)
        for n in range(self.operations):
            kind, op = self.next_op()
            self.tally.kinds[kind] += 1
            if kind == "skip_counting":
                self.skip_counting()
            elif kind == "stale_parent_save":
                self.stale_parent_save(n)
            elif kind == "bulk":
                self.bulk_write(op, self.policy())
            else:
                self.counted(kind, op, self.policy())
        return self.tally

    def policy(self) -> RetryPolicy:
        """Most writes retry patiently; some give up after 1 or 2 attempts, so that retries run out."""
        return self.rng.choice(IMPATIENT) if self.rng.random() < self.config.impatient else PATIENT

    def violation(self, message: str) -> None:
        self.tally.violations.append(f"thread {self.index}: {message}")

    def commit(self, op: Op, instances: List[Child], token: str, policy: RetryPolicy) -> WriteResult:
        if len(op) == 1:
            (_, action), instance = op[0], instances[0]
            if action == SAVE:
                return instance.save(retry=policy, token=token)  # type: ignore[no-any-return]
            return instance.delete(retry=policy, token=token)  # type: ignore[no-any-return]
        transaction = CountedTransaction(retry=policy, token=token)
        for (_, action), instance in zip(op, instances):
            if action == SAVE:
                transaction.save(instance)
            else:
                transaction.delete(instance)
        return transaction.commit()

    def counted(self, kind: str, op: Op, policy: RetryPolicy) -> None:
        expected = self.expected_error(op)
        before = {ref: self.exists[ref] for ref, _ in op}
        instances = [ref.instance() for ref, _ in op]
        token = f"T{self.index}-{self.rng.getrandbits(64):016x}"
        where = f"{kind} {[(ref.sk, action) for ref, action in op]}"
        try:
            result = self.commit(op, instances, token, policy)
        except RetriesExhaustedError as error:
            self.exhausted(kind, op, before, expected, error, instances, token, where)
            return
        except CounterError as error:
            self.tally.outcomes[f"rejected:{type(error).__name__}"] += 1
            self.rejected(op, before, expected, error, where)
            return
        self.tally.outcomes["done:recovered" if result.recovered else "done"] += 1
        self.done(op, before, expected, result, where)

    def done(self, op: Op, before: Dict[ChildRef, bool], expected: Optional[Type[CounterError]],
             result: WriteResult, where: str) -> None:
        """A write reported done: it must be done, and be the write the history allows."""
        if expected is not None:
            absent_deletes = [ref for ref, action in op if action == DELETE and not before[ref]]
            if expected is MissingChildError and len(absent_deletes) == len(op) and result.recovered \
                    and result.uncertain and result.attempts > 1:
                # The documented delete-after-ambiguous-attempt rule: a delete whose earlier attempt was
                # ambiguous reads "no such child" as its own commit, and says so (result.uncertain). Here that
                # attempt had not committed: the child never existed. The counter is untouched.
                self.tally.absent_deletes_done["counted_writes"] += 1
            else:
                self.violation(f"{where}: reported done, but the history predicts {expected.__name__}")
        for ref, action in op:
            item = self.truth.child(ref)
            if action == SAVE:
                if item is None:
                    self.violation(f"{where}: reported done, but {ref.sk} is not stored")
                elif before[ref] is False and item.get("_cwid") != {"S": result.token}:
                    self.violation(f"{where}: {ref.sk} is stored with write id {item.get('_cwid')}, not "
                                   f"{result.token}")
                self.exists[ref] = True
            else:
                if item is not None:
                    self.violation(f"{where}: reported done, but {ref.sk} is still stored")
                self.exists[ref] = False

    def unchanged(self, op: Op, before: Dict[ChildRef, bool], where: str) -> None:
        for ref, _ in op:
            stored = self.truth.child(ref) is not None
            if stored != before[ref]:
                self.violation(f"{where}: refused or failed without ambiguity, yet {ref.sk} "
                               f"{'appeared' if stored else 'disappeared'}")
                self.exists[ref] = stored

    def rejected(self, op: Op, before: Dict[ChildRef, bool], expected: Optional[Type[CounterError]],
                 error: CounterError, where: str) -> None:
        if expected is None:
            if isinstance(error, DuplicateChildError):
                self.violation(f"{where}: false duplicate {getattr(error, 'key', '')}: the history says absent")
            elif isinstance(error, MissingChildError):
                self.violation(f"{where}: false missing child {getattr(error, 'key', '')}: the history says "
                               f"stored")
            else:
                self.violation(f"{where}: unexpected {type(error).__name__}: {error}")
        elif not isinstance(error, expected):
            self.violation(f"{where}: {type(error).__name__} ({error}), the history predicts {expected.__name__}")
        else:
            wrong = {ref.key for ref, action in op if (action == SAVE) == before[ref]}
            if getattr(error, "key", None) not in wrong:
                self.violation(f"{where}: {type(error).__name__} names {getattr(error, 'key', None)}, not one of "
                               f"{sorted(wrong)}")
        self.unchanged(op, before, where)

    def exhausted(self, kind: str, op: Op, before: Dict[ChildRef, bool], expected: Optional[Type[CounterError]],
                  error: RetriesExhaustedError, instances: List[Child], token: str, where: str) -> None:
        if not error.ambiguous:
            self.tally.outcomes["failed:not_ambiguous"] += 1
            self.unchanged(op, before, where)
            return
        self.tally.outcomes["failed:ambiguous"] += 1
        applied = self.resolve(op, before, expected, where)
        self.tally.retries[state(applied)] += 1
        self.retry_same_token(op, before, expected, instances, token, applied, where)

    def resolve(self, op: Op, before: Dict[ChildRef, bool], expected: Optional[Type[CounterError]],
                where: str) -> bool:
        """After an ambiguous failure: read whether the write was applied, whole or not at all."""
        after = {ref: self.truth.child(ref) is not None for ref, _ in op}
        self.exists.update(after)
        if all(after[ref] == before[ref] for ref, _ in op):
            return False
        if expected is None and all(after[ref] == (action == SAVE) for ref, action in op):
            return True  # every child of a write the history allows changed: it was applied
        self.violation(f"{where}: applied in part, or applied although refused: before {before}, after {after}")
        return False

    def retry_same_token(self, op: Op, before: Dict[ChildRef, bool], expected: Optional[Type[CounterError]],
                         instances: List[Child], token: str, applied: bool, where: str) -> None:
        """The caller retries an ambiguous write with the same token, as documented."""
        where = f"{where} (retried with the same token)"
        puts = any(action == SAVE for _, action in op)
        for _ in range(5):
            try:
                result = self.commit(op, instances, token, PATIENT)
            except RetriesExhaustedError as error:
                self.tally.retries[f"{state(applied)}:retry_exhausted"] += 1
                if not error.ambiguous:
                    self.unchanged(op, {ref: self.exists[ref] for ref, _ in op}, where)
                elif not applied:
                    applied = self.resolve(op, before, expected, where)
                continue
            except CounterError as error:
                self.tally.retries[f"{state(applied)}:retry_rejected:{type(error).__name__}"] += 1
                if applied and isinstance(error, MissingChildError) and not puts:
                    # documented: across calls, a server ignoring tokens (moto) cannot recognise a committed delete
                    self.unchanged(op, {ref: False for ref, _ in op}, where)
                    return
                if applied:
                    self.violation(f"{where}: {type(error).__name__} after an idempotent retry of a write that "
                                   f"had committed" + (" (a false duplicate)" if puts else ""))
                    return
                self.rejected(op, before, expected, error, where)
                return
            self.tally.retries[f"{state(applied)}:retry_done" + (":recovered" if result.recovered else "")] += 1
            if applied and not result.recovered:
                self.violation(f"{where}: the first call had committed, yet the retry applied it again")
            self.done(op, before, None if applied else expected, result, where)
            return
        self.violation(f"{where}: the retries kept failing")

    def bulk_write(self, op: Op, policy: RetryPolicy) -> None:
        """``bulk_write``: per child, added / removed / rejected as the history predicts; a failed transaction
        applied whole or not at all."""
        instances = [ref.instance() for ref, _ in op]
        by_instance = {id(instance): (ref, action) for (ref, action), instance in zip(op, instances)}
        before = {ref: self.exists[ref] for ref, _ in op}
        result = bulk_write(saves=[i for (_, a), i in zip(op, instances) if a == SAVE],
                            deletes=[i for (_, a), i in zip(op, instances) if a == DELETE],
                            retry=policy, max_actions=self.rng.choice([4, 100]))
        tokens = {r.token for r in result.results}
        recovered = any(r.recovered and r.uncertain for r in result.results)
        failures: Dict[int, List[Tuple[ChildRef, str]]] = {}
        for outcome in result.outcomes:
            ref, action = by_instance[id(outcome.instance)]
            where = f"bulk {action} {ref.sk}"
            valid = (action == SAVE) != before[ref]
            error = outcome.error
            self.tally.bulk[f"{outcome.status}:{type(error).__name__}" if error else outcome.status] += 1
            if outcome.status in ("added", "removed"):
                item = self.truth.child(ref)
                if not valid and action == DELETE and recovered:
                    self.tally.absent_deletes_done["bulk_children"] += 1
                elif not valid:
                    self.violation(f"{where}: reported {outcome.status}, but the history predicts a refusal")
                if (item is not None) != (action == SAVE) or \
                        (action == SAVE and valid and (item or {}).get("_cwid", {}).get("S") not in tokens):
                    self.violation(f"{where}: reported {outcome.status}, but the engine holds {item}")
                self.exists[ref] = action == SAVE
            elif outcome.status == "rejected":
                want = DuplicateChildError if action == SAVE else MissingChildError
                if valid or not isinstance(error, want):
                    self.violation(f"{where}: rejected with {type(error).__name__}, the history predicts "
                                   f"{'success' if valid else want.__name__}")
                self.unchanged([(ref, action)], before, where)
            elif isinstance(error, RetriesExhaustedError) and error.ambiguous:
                failures.setdefault(id(error), []).append((ref, action))
            elif isinstance(error, RetriesExhaustedError):
                self.unchanged([(ref, action)], before, where)
            else:
                self.violation(f"{where}: failed with {type(error).__name__}: {error}")
        for group in failures.values():  # one transaction each: applied whole or not at all
            wrong = [ref for ref, action in group if (action == SAVE) == before[ref]]
            applied = self.resolve(group, before, MissingChildError if wrong else None, f"bulk {group}")
            self.tally.bulk[f"failed_transaction:{state(applied)}"] += 1

    # -- around the library -----------------------------------------------------------------------------------
    def skip_counting(self) -> None:
        """Write one child without counting it, then audit and repair its parents, while the others write."""
        ref = self.rng.choice(self.children)
        instance = ref.instance()
        with skip_counting(ref.model):
            if self.exists[ref]:
                instance.delete()
            else:
                instance.save()
        self.exists[ref] = not self.exists[ref]
        self.tally.skip["uncounted_" + ("saves" if self.exists[ref] else "deletes")] += 1
        targets: List[Tuple[Any, Any]] = [(Like.post if ref.kind == "like" else Bookmark.post, (ref.pk, "META"))]
        if ref.kind == "bookmark":
            targets.append((Bookmark.owner, ref.user_id))
        for target, parent in targets:
            for _ in range(ROUNDS):
                try:
                    report = audit(target, parents=[parent])
                    self.tally.skip["audits"] += 1
                    if report.drifts:
                        self.tally.skip["drifts_found"] += len(report.drifts)
                        for outcome in repair(report.drifts, max_attempts=10).repairs:
                            self.tally.skip[f"repair:{outcome.status}"] += 1
                        continue
                except CounterError as error:
                    self.tally.skip[f"repair_raised:{type(error).__name__}"] += 1
                    continue
                if not report.unverifiable:
                    break  # the audit proved the parent exact: it held still around the count
                # The parent changed during every count of the audit (live writes): audit again.
                self.tally.skip["audits_unverifiable_under_live_writes"] += 1
            else:
                self.violation(f"skip_counting on {parent}: no audit proved it exact in {ROUNDS} rounds")

    def stale_parent_save(self, n: int) -> None:
        """Save a copy of a post loaded long ago, with a new title: its counters must survive."""
        assert self.stale is not None
        self.stale.title = f"edited by thread {self.index}, op {n}"
        try:
            self.stale.save()
            self.tally.skip["stale_parent_saves"] += 1
        except Exception as error:  # PynamoDB's UpdateError once botocore's retries are spent
            self.tally.skip[f"stale_parent_save_raised:{type(error).__name__}"] += 1


# -- the run --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def pointed(hosts: Mapping[Any, str], read_timeout: float, retries: int) -> Iterator[None]:
    """Point models at hosts with a short read timeout, and restore every setting afterwards."""
    saved = {model: {name: model.Meta.__dict__.get(name, _MISSING)
                     for name in ("host", "read_timeout_seconds", "max_retry_attempts")} for model in ALL_MODELS}
    try:
        for model in ALL_MODELS:
            host = hosts.get(model)
            if host is not None:
                for name, value in (("host", host), ("read_timeout_seconds", read_timeout),
                                    ("max_retry_attempts", retries)):
                    setattr(model.Meta, name, value)
                model._connection = None
        yield
    finally:
        for model, values in saved.items():
            for name, value in values.items():
                if value is _MISSING:
                    if name in model.Meta.__dict__:
                        delattr(model.Meta, name)
                else:
                    setattr(model.Meta, name, value)
            model._connection = None


_MISSING = object()


def ensure_tables() -> None:
    for model in (Post, User):
        if not model.exists():
            model.create_table(billing_mode="PAY_PER_REQUEST")


def run(engine: ServedMoto, config: RunConfig = RunConfig()) -> Dict[str, Any]:
    """Run the fault injection on ``engine`` (its models must not be in use elsewhere) and return the summary.

    The summary's ``violations`` lists every invariant the run found broken; it is empty when all held.
    """
    started = time.monotonic()
    repair_rate = config.rate / 2 if config.repair_rate is None else config.repair_rate
    truth = Truth(engine.endpoint_url)
    posts = [(f"POST#F{n}", "META") for n in range(config.posts)]
    users = [f"USER#F{n}" for n in range(config.users)]
    transaction_faults = [faults.LOSE_RESPONSE, faults.RESET_BEFORE, faults.THROTTLE, faults.SERVER_ERROR,
                          faults.CONFLICT, faults.delay(config.delay)]
    update_faults = [faults.LOSE_RESPONSE, faults.RESET_BEFORE, faults.THROTTLE, faults.SERVER_ERROR,
                     faults.delay(config.delay)]
    with FaultProxy(engine.endpoint_url) as children_proxy, FaultProxy(engine.endpoint_url) as parents_proxy:
        hosts: Dict[Any, str] = {model: children_proxy.endpoint_url for model in ALL_MODELS}
        hosts.update({Post: parents_proxy.endpoint_url, User: parents_proxy.endpoint_url})
        with pointed(hosts, config.read_timeout, retries=8):
            ensure_tables()
            for pk, sk in posts:
                Post(pk=pk, sk=sk, title="fault run").save()
            for user in users:
                User(user_id=user).save()
            share, extra = divmod(config.operations, config.threads)
            workers = [Worker(i, config, share + (1 if i < extra else 0), truth, posts, users)
                       for i in range(config.threads)]
            children_proxy.set_random_faults(config.rate, transaction_faults, seed=config.seed)
            parents_proxy.set_random_faults(repair_rate, update_faults, seed=config.seed + 1, target="UpdateItem")
            with ThreadPoolExecutor(config.threads) as pool:
                tallies = list(pool.map(lambda worker: worker.run(), workers))
            children_proxy.clear()
            parents_proxy.clear()
            run_seconds = time.monotonic() - started
            tally = Tally()
            for part in tallies:
                tally.merge(part)
            checked = check_final_state(truth, workers, posts, users, tally)
        injected = {"TransactWriteItems": dict(sorted(children_proxy.injected.items())),
                    "UpdateItem": dict(sorted(parents_proxy.injected.items()))}
    outcomes = dict(sorted(tally.outcomes.items()))
    return {
        "config": dict(asdict(config), repair_rate=repair_rate),
        "seconds": round(run_seconds, 1),
        "operations": sum(tally.kinds.values()),
        "operations_by_kind": dict(sorted(tally.kinds.items())),
        "faults_injected": injected,
        "faults_injected_total": sum(sum(kinds.values()) for kinds in injected.values()),
        "outcomes": outcomes,
        "ambiguous_failures": dict(sorted(tally.retries.items())),
        "bulk_children": dict(sorted(tally.bulk.items())),
        # deletes of children that did not exist, reported done by the delete-after-ambiguous-attempt rule
        "absent_deletes_reported_done": dict(sorted(tally.absent_deletes_done.items())),
        "around_the_library": dict(sorted(tally.skip.items())),
        **checked,
        "violations": tally.violations,
    }


def check_final_state(truth: Truth, workers: Sequence[Worker], posts: Sequence[Tuple[str, str]],
                      users: Sequence[str], tally: Tally) -> Dict[str, Any]:
    """The invariants that hold after the run: counters equal children, children equal the histories."""
    expected = {(ref.pk, ref.sk) for worker in workers for ref, present in worker.exists.items() if present}
    stored = {(item["pk"]["S"], item["sk"]["S"]) for item in truth.scan(TABLE) if item["sk"]["S"] != "META"}
    for key in sorted(stored - expected):
        tally.violations.append(f"final state: {key} is stored, but no thread's history has it")
    for key in sorted(expected - stored):
        tally.violations.append(f"final state: {key} is missing, but its thread's history has it")
    counters = 0
    for pk, sk in posts:
        parent = Post.get(pk, sk, consistent_read=True)
        for attribute, prefix in (("like_tally", "LIKE#"), ("bookmark_count", "BOOKMARK#")):
            model = Like if prefix == "LIKE#" else Bookmark
            children = model.count(pk, model.sk.startswith(prefix), consistent_read=True)
            counters += 1
            if getattr(parent, attribute) != children:
                tally.violations.append(f"{pk}.{attribute} = {getattr(parent, attribute)}, {children} children")
    for user in users:
        children = bookmarks_of(user)
        counters += 1
        stored_count = User.get(user, consistent_read=True).bookmarks
        if stored_count != children:
            tally.violations.append(f"{user}.bookmarks = {stored_count}, {children} children")
    drifts = [drift.as_dict() for target in (Post.like_tally, Post.bookmark_count, User.bookmarks)
              for drift in audit(target).drifts]
    for drift in drifts:
        tally.violations.append(f"final audit: {drift}")
    return {"counters_checked": counters, "children_stored": len(stored), "drift_found": len(drifts)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.fault_run", description=__doc__.split("\n\n")[0])
    defaults = RunConfig()
    parser.add_argument("--operations", type=int, default=defaults.operations)
    parser.add_argument("--rate", type=float, default=defaults.rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--repair-rate", type=float, default=None)
    parser.add_argument("--read-timeout", type=float, default=defaults.read_timeout)
    args = parser.parse_args(argv)
    config = RunConfig(operations=args.operations, rate=args.rate, seed=args.seed, threads=args.threads,
                       repair_rate=args.repair_rate, read_timeout=args.read_timeout,
                       delay=max(defaults.delay, args.read_timeout * 1.6))
    with ServedMoto() as engine:
        summary = run(engine, config)
    json.dump(summary, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
