"""The engines one computation over an export's data files runs on: this machine's cores (``"local"``: one process
per data file, merged as they come) or a Spark job on the caller's session (``"spark"``), with the same result."""
from __future__ import annotations

import gc
import multiprocessing
import operator
import os
import threading
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any, List, Sequence, Tuple

import pytest

from pynamodb_counters.exceptions import ConfigurationError, InvalidArgumentError
from pynamodb_counters.reconcile.export import _engines
from pynamodb_counters.reconcile.export._engines import Task, run, run_local, run_spark

#: what a task's work returns here: items per data file, and where it ran (process id, thread id)
Tally = Tuple["Counter[str]", frozenset]


@dataclass(frozen=True)
class ToyExport:
    """An export's stand-in: picklable, as the export reader's are."""

    table: str


@dataclass(frozen=True)
class ToyFile:
    """A data file's stand-in: its key and the items it holds."""

    key: str
    items: Tuple[int, ...]


def toy_tasks(files: int = 6) -> List[Task]:
    export = ToyExport("Social")
    return [(export, ToyFile(f"data/{n}.json.gz", tuple(range(n * 3 + 1)))) for n in range(files)]


def count_items(task: Task) -> Tally:
    """Items per data file, and where the count ran."""
    _, data_file = task
    return Counter({data_file.key: len(data_file.items)}), frozenset({(os.getpid(), threading.get_ident())})


def merge(a: Tally, b: Tally) -> Tally:
    return a[0] + b[0], a[1] | b[1]


EMPTY: Tally = (Counter(), frozenset())
# every toy file holds an item: a Counter sum drops zero counts, and before Python 3.10 a zero is not a missing key
EXPECTED = Counter({f"data/{n}.json.gz": n * 3 + 1 for n in range(6)})


def counts(tally: Tally) -> Counter[str]:
    return tally[0]


def failing(task: Task) -> Tally:
    """UnitOfWork that refuses one data file with a library error naming it, as the export reader does."""
    if task[1].key == "data/3.json.gz":
        raise ConfigurationError(f"{task[1].key}: not a DynamoDB JSON export")
    return count_items(task)


# --- local ----------------------------------------------------------------------------------------------------


def test_the_local_engine_counts_every_data_file_once_in_worker_processes() -> None:
    result = run_local(toy_tasks(), count_items, merge, EMPTY, workers=2)
    assert counts(result) == EXPECTED
    processes = {pid for pid, _ in result[1]}
    assert os.getpid() not in processes and 1 <= len(processes) <= 2


def test_the_workers_are_never_forked_from_this_process() -> None:
    """A fork copies the locks other threads hold as they are: the workers start from a fresh interpreter."""
    assert _engines.START_METHOD == ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                     else "spawn")
    assert _engines.CONTEXT.get_start_method() == _engines.START_METHOD


def test_a_pool_started_beside_another_thread_warns_of_no_fork() -> None:
    """Python 3.12+ warns when a process with several threads forks (on earlier versions nothing warns, and the
    test above is the guard)."""
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait)
    waiting.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_local(toy_tasks(), count_items, merge, EMPTY, workers=2)
    finally:
        stop.set()
        waiting.join()
    assert counts(result) == EXPECTED
    assert [str(warning.message) for warning in caught if "fork" in str(warning.message)] == []


def test_work_that_does_not_pickle_is_refused_before_any_worker_starts() -> None:
    unpicklable = threading.Lock()  # held by the work's closure: neither pickles
    ran: List[Task] = []

    def work(task: Task) -> Tally:
        with unpicklable:
            ran.append(task)
            return count_items(task)

    with pytest.raises(InvalidArgumentError, match=r"^the work of the local engine is pickled for its worker "
                                                   r"processes \(started by (forkserver|spawn)\), and .* does not "
                                                   r"pickle .*: make it a function or class of a module's top level, "
                                                   r"or pass workers=1 to run it in this process$"):
        run_local(toy_tasks(), work, merge, EMPTY, workers=2)
    assert ran == []
    assert counts(run_local(toy_tasks(), work, merge, EMPTY, workers=1)) == EXPECTED  # in this process


def test_one_task_or_one_worker_runs_in_this_process() -> None:
    here = frozenset({(os.getpid(), threading.get_ident())})
    assert run_local(toy_tasks(1), count_items, merge, EMPTY, workers=4)[1] == here
    single = run_local(toy_tasks(), count_items, merge, EMPTY, workers=1)
    assert counts(single) == EXPECTED and single[1] == here


def test_the_local_engine_uses_the_machines_cores_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert run_local(toy_tasks(), count_items, merge, EMPTY)[1] == frozenset({(os.getpid(), threading.get_ident())})


@pytest.mark.parametrize("workers", [1, 2])
def test_no_tasks_give_the_empty_result(workers: int) -> None:
    assert run_local([], count_items, merge, EMPTY, workers=workers) is EMPTY


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_raised_by_the_work_of_one_data_file_arrives_as_itself(workers: int) -> None:
    with pytest.raises(ConfigurationError, match=r"^data/3\.json\.gz: not a DynamoDB JSON export$"):
        run_local(toy_tasks(), failing, merge, EMPTY, workers=workers)


@pytest.mark.parametrize("workers", [0, -1, 1.5, "2", True])
def test_workers_is_a_whole_number_of_at_least_one(workers: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"workers is a whole number of at least 1 .*, not "):
        run_local(toy_tasks(), count_items, merge, EMPTY, workers=workers)


def test_run_picks_the_engine_by_name() -> None:
    assert counts(run("local", toy_tasks(), count_items, merge, EMPTY, workers=2)) == EXPECTED


BAD_RUNS = {
    "an unknown engine": (("dask",), {}, r"engine is 'local' \(this machine's cores\) or 'spark' .*, not 'dask'"),
    "spark without a session": (("spark",), {}, r"engine='spark' needs spark=, a pyspark\.sql\.SparkSession you "
                                                r"built .*: pynamodb-counters never creates one"),
    "a session that is not one": (("spark",), {"spark": "local[2]"}, r"spark= is a pyspark\.sql\.SparkSession .*, "
                                                                     r"not 'local\[2\]'"),
    "a session for the local engine": (("local",), {"spark": object()}, r"spark= is for engine='spark'"),
    "workers for the spark engine": (("spark",), {"spark": object(), "workers": 2}, r"workers= is for "
                                                                                    r"engine='local'"),
}


@pytest.mark.parametrize("engine, options, message", list(BAD_RUNS.values()), ids=list(BAD_RUNS))
def test_a_bad_engine_argument_is_refused_before_any_work(engine: Sequence[str], options: Any, message: str) -> None:
    ran: List[Task] = []

    def work(task: Task) -> Tally:
        ran.append(task)
        return count_items(task)

    with pytest.raises(InvalidArgumentError, match=message):
        run(engine[0], toy_tasks(), work, merge, EMPTY, **options)
    assert ran == []


# --- spark ----------------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_the_spark_engine_gives_the_local_engines_result(spark: Any) -> None:
    on_spark = run("spark", toy_tasks(), count_items, merge, EMPTY, spark=spark)
    assert counts(on_spark) == counts(run("local", toy_tasks(), count_items, merge, EMPTY)) == EXPECTED
    assert os.getpid() not in {pid for pid, _ in on_spark[1]}  # on the executors' Python workers


@pytest.mark.spark
def test_no_tasks_on_spark_give_the_empty_result(spark: Any) -> None:
    assert run_spark([], count_items, merge, EMPTY, spark) is EMPTY


@pytest.mark.spark
def test_an_error_raised_by_the_work_on_an_executor_arrives_as_itself(spark: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^data/3\.json\.gz: not a DynamoDB JSON export$"):
        run_spark(toy_tasks(), failing, merge, EMPTY, spark)


def collecting(task: Task) -> List[bool]:
    """Whether Python's cyclic collector runs where the task's work runs."""
    return [gc.isenabled()]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_collector_is_paused_while_the_work_runs_and_restored_after(workers: int) -> None:
    assert gc.isenabled()
    assert run_local(toy_tasks(), collecting, operator.add, [], workers=workers) == [False] * 6
    assert gc.isenabled()
    gc.disable()
    try:
        run_local(toy_tasks(), collecting, operator.add, [], workers=workers)
        assert not gc.isenabled()  # as the caller had it
    finally:
        gc.enable()
    with pytest.raises(ConfigurationError):
        run_local(toy_tasks(), failing, merge, EMPTY, workers=workers)
    assert gc.isenabled()  # after an error too
