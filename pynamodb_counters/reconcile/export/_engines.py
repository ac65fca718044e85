"""
Engines: one computation over an export's data files, run on this machine's cores or as a Spark job, with the
same result.

::

    tasks = [(export, data_file) for data_file in export.files]
    total = run("local", tasks, work, merge, empty)                  # this machine's cores
    total = run("spark", tasks, work, merge, empty, spark=session)   # EMR, Glue, local[2]

A computation is three things: ``work(task)`` turns one task (an export and one of its data files) into a partial
result; ``merge(a, b)`` combines two partial results, whatever their order and grouping (results arrive as their
tasks finish), and may update ``a`` and return it, never ``b``; ``empty`` is what no tasks give. Tasks and partial
results cross processes, so they pickle.

On the local engine the work is pickled once and sent with each task to worker processes started by
``forkserver`` (``spawn`` where the platform has no ``forkserver``: Windows), never forked from the caller's process,
whose other threads may hold a lock when it forks. A worker is a fresh interpreter that imports what it unpickles,
and first, as any worker of ``multiprocessing`` started so, the caller's ``__main__`` where it is a script or a
module run with ``-m`` (its code under ``if __name__ == "__main__":`` does not run again there). The fork server
imports this package once, and the workers fork from it with it imported. On Spark, PySpark pickles the work and
its closure (cloudpickle) for the executors, which must be able to import the models and this package. A library
error raised by the work (:class:`~pynamodb_counters.exceptions.CounterError`) reaches the caller as itself on both
engines.

PySpark is never imported here: the caller builds the session (the library never creates one) and it is used
through its ``sparkContext`` alone.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import multiprocessing
import os
import pickle
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, Callable, Dict, Generic, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from ...exceptions import CounterError, ExportError, InvalidArgumentError

__all__ = ["ENGINES", "START_METHOD", "Task", "run", "run_by_key", "run_local", "run_spark"]

P = TypeVar("P")
K = TypeVar("K")
V = TypeVar("V")
R = TypeVar("R")

Task = Tuple[Any, Any]
"""One unit of work: ``(export, data file)``, both picklable."""

ENGINES = ("local", "spark")
"""The engines :func:`run` knows."""

START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
"""How the local engine starts its worker processes: ``forkserver`` where the platform has it (Linux, macOS), else
``spawn`` (Windows). Never ``fork``: a fork copies the caller's other threads' locks as they are, and a worker could
wait forever on one (Python 3.12 warns of it; 3.14 no longer forks by default)."""

CONTEXT: BaseContext = multiprocessing.get_context(START_METHOD)
"""The ``multiprocessing`` context of :data:`START_METHOD`, the local engine's pools'."""

_PRELOADED = "pynamodb_counters"
"""What the fork server imports once before it starts: this package, PynamoDB and botocore, which each worker would
import again otherwise (most of a second each)."""

_WORK: Optional[Callable[[Task], Any]] = None
"""In a worker process: the work of its pool, unpickled once when the worker starts."""


def run(engine: str, tasks: Sequence[Task], work: Callable[[Task], P], merge: Callable[[P, P], P], empty: P, *,
        spark: Any = None, workers: Optional[int] = None) -> P:
    """Run ``work`` on every task and merge the results, on ``engine``: ``"local"`` (:func:`run_local`, ``workers``
    processes) or ``"spark"`` (:func:`run_spark`, on the session ``spark``).

    :raises InvalidArgumentError: an unknown engine, or an option of the other engine.
    """
    _check(engine, spark, workers)
    if engine == "local":
        return run_local(tasks, work, merge, empty, workers)
    return run_spark(tasks, work, merge, empty, spark)


def _check(engine: str, spark: Any, workers: Optional[int]) -> None:
    if engine == "local":
        if spark is not None:
            raise InvalidArgumentError("spark= is for engine='spark': engine='local' runs on this machine's cores "
                                       "(pass engine='spark' to run on the session)")
    elif engine == "spark":
        if workers is not None:
            raise InvalidArgumentError("workers= is for engine='local': on engine='spark' the session's executors "
                                       "do the work (size them when building the session)")
    else:
        raise InvalidArgumentError(f"engine is 'local' (this machine's cores) or 'spark' (a PySpark job on "
                                   f"spark=), not {engine!r}")


def run_by_key(engine: str, tasks: Sequence[Task], work: Callable[[Task], Dict[K, V]],
               combine: Callable[[V, V], V], judge: Callable[[V], R], merge: Callable[[R, R], R], empty: R, *,
               spark: Any = None, workers: Optional[int] = None,
               done: Optional[Callable[[Task], None]] = None) -> R:
    """A computation whose findings need every task's share of a key: ``work(task)`` gives its values by key, the
    values of one key are combined (``combine(a, b)``, whatever their order), each key's whole value is judged
    (``judge(value)``), and the judgements merged (``merge``; ``empty`` when there are none).

    On ``"local"``, the tasks run as in :func:`run_local` and the keys are combined and judged in this process.
    On ``"spark"``, the values are combined on the executors (a ``reduceByKey``) and judged there: only the
    judgements reach the driver, however many keys the tasks give. ``done(task)`` is called in this process as
    each task's values are merged (on Spark, for every task once the job ends).

    :raises InvalidArgumentError: as :func:`run`.
    """
    _check(engine, spark, workers)
    if engine == "spark":
        context = _spark_context(spark)
        found: Union[R, _Raised] = empty
        if tasks:
            found = (context.parallelize(list(tasks), len(tasks)).flatMap(_GuardedPairs(work))
                     .reduceByKey(_GuardedMerge(combine)).map(_GuardedJudge(judge))
                     .fold(empty, _GuardedMerge(merge)))
        if isinstance(found, _Raised):
            raise found.error
        for task in tasks:
            if done is not None:
                done(task)
        return found
    nothing: Dict[K, V] = {}
    merged = run_local(tasks, work, _ByKey[K, V](combine), nothing, workers, done)
    with collection_paused():
        return functools.reduce(merge, map(judge, merged.values()), empty)


def run_local(tasks: Sequence[Task], work: Callable[[Task], P], merge: Callable[[P, P], P], empty: P,
              workers: Optional[int] = None, done: Optional[Callable[[Task], None]] = None) -> P:
    """Run ``work`` on every task on this machine's cores: one task per data file in a pool of ``workers``
    processes (default: one per core) started by :data:`START_METHOD`, each result merged as it comes. One task, or
    one worker, runs in this process, and nothing is pickled.

    ``work`` is pickled once, before any process starts, and unpickled once by each worker as it starts: it must
    pickle (a function or a class of a module's top level, an instance of one; not a closure), and whatever it
    pickles by reference must be importable in the workers, which import the caller's ``__main__`` script too (its
    code outside ``if __name__ == "__main__":`` runs again there; a module run with ``-m`` likewise, not a
    package's ``__main__``, an interactive session's nor ``python -c``'s).

    An error raised by ``work`` is raised here as itself; the tasks not yet started are cancelled.

    :param done: called in this process with each task, once its result is merged.
    :raises InvalidArgumentError: ``workers`` is not a whole number of at least 1, or ``work`` does not pickle.
    :raises ExportError: a worker process ended before its task did (the worker's own error, printed on its
      standard error, says why), the tasks not yet started cancelled.
    """
    count = _worker_count(workers)
    if not tasks:
        return empty
    with collection_paused():
        if len(tasks) == 1 or count == 1:
            return _merged(((task, work(task)) for task in tasks), merge, done)
        sent = _pickled(work)
        _preload()
        pool = ProcessPoolExecutor(min(count, len(tasks)), mp_context=CONTEXT, initializer=_adopt, initargs=(sent,))
        try:
            futures: Dict[Future[P], Task] = {pool.submit(_adopted, task): task for task in tasks}
            # each result is let go once merged: a data file's result can be as large as the export's parents
            return _merged(((futures.pop(future), future.result()) for future in as_completed(futures)), merge,
                           done)
        except BrokenProcessPool as error:
            raise ExportError(f"a worker process of the local engine ended before its task did ({error}); its own "
                              f"error, printed on its standard error, says why. The workers are started by "
                              f"{START_METHOD} and import the script that called the audit again (__main__): a "
                              f"script that audits at its top level must do it under "
                              f"if __name__ == \"__main__\": (else each worker runs it again). Or pass workers=1 "
                              f"to read in this process", cause=error) from error
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then restored as it was. Partial results are millions of small
    containers without cycles: built, pickled and unpickled, they would have the collector walk the growing heap
    again and again (a third of a local run's time, measured). Nothing here makes a cycle; a caller's other
    threads meanwhile free their cycles when it ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _merged(results: Iterable[Tuple[Task, P]], merge: Callable[[P, P], P],
            done: Optional[Callable[[Task], None]]) -> P:
    """The results merged in the order they come (at least one), ``done`` told of each task."""
    merged: List[P] = []
    for task, result in results:
        merged[:] = [merge(merged[0], result) if merged else result]
        if done is not None:
            done(task)
    return merged[0]


def run_spark(tasks: Sequence[Task], work: Callable[[Task], P], merge: Callable[[P, P], P], empty: P,
              spark: Any) -> P:
    """Run ``work`` on every task as a Spark job on the session ``spark`` (a ``pyspark.sql.SparkSession`` the
    caller built: EMR's, Glue's, ``local[2]``): one partition per task, the results merged on the executors
    (``treeReduce``).

    ``work`` and its closure are pickled by PySpark for the executors, which must import the models and this
    package. A :class:`~pynamodb_counters.exceptions.CounterError` raised by ``work`` on an executor is brought
    back and raised here as itself (the other tasks still run); any other error is PySpark's to report.

    :raises InvalidArgumentError: ``spark`` is ``None`` or not a session with a ``sparkContext``.
    """
    context = _spark_context(spark)
    if not tasks:
        return empty
    rdd = context.parallelize(list(tasks), len(tasks))
    found: Union[P, _Raised] = rdd.map(_Guarded(work)).treeReduce(_GuardedMerge(merge))
    if isinstance(found, _Raised):
        raise found.error
    return found


def _worker_count(workers: Optional[int]) -> int:
    if workers is None:
        return os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgumentError(f"workers is a whole number of at least 1 (processes on this machine; None: one "
                                   f"per core), not {workers!r}")
    return workers


def _pickled(work: Callable[[Task], Any]) -> bytes:
    """``work``, pickled for the workers: a library error its pickling raises (one naming what cannot travel, and
    the fix) as itself.

    :raises InvalidArgumentError: ``work`` does not pickle.
    """
    try:
        return pickle.dumps(work, pickle.HIGHEST_PROTOCOL)
    except CounterError:
        raise
    except Exception as error:  # PicklingError; AttributeError, TypeError for a local object or a lock
        raise InvalidArgumentError(f"the work of the local engine is pickled for its worker processes (started by "
                                   f"{START_METHOD}), and {work!r} does not pickle ({error}): make it a function or "
                                   f"class of a module's top level, or pass workers=1 to run it in this process"
                                   ) from error


def _preload() -> None:
    """Have ``multiprocessing``'s fork server import this package once, before it starts (nothing once it runs),
    besides the modules the program asked it for (``multiprocessing.set_forkserver_preload``, whose list is read
    where it is kept: where it cannot be read, nothing is changed). Its workers, forked from it, then start with
    the package imported (whose import starts no thread)."""
    if START_METHOD != "forkserver":
        return
    from multiprocessing import forkserver

    preloaded = getattr(getattr(forkserver, "_forkserver", None), "_preload_modules", None)
    if isinstance(preloaded, list) and _PRELOADED not in preloaded:
        forkserver.set_forkserver_preload([*preloaded, _PRELOADED])


def _adopt(sent: bytes) -> None:
    """In a worker, as it starts: unpickle the pool's work (``sent``)."""
    global _WORK
    _WORK = pickle.loads(sent)


def _adopted(task: Task) -> Any:
    """In a worker: run the pool's work on ``task``."""
    assert _WORK is not None, "_adopted runs in a worker of run_local's pool only"
    with collection_paused():
        return _WORK(task)


def _spark_context(spark: Any) -> Any:
    if spark is None:
        raise InvalidArgumentError("engine='spark' needs spark=, a pyspark.sql.SparkSession you built (the job's "
                                   "session on EMR or Glue; SparkSession.builder.master('local[2]').getOrCreate() "
                                   "on one machine): pynamodb-counters never creates one")
    try:
        context = spark.sparkContext
    except Exception:  # AttributeError; Spark Connect's sessions raise their own: they have no RDDs
        context = None
    if not callable(getattr(context, "parallelize", None)):
        raise InvalidArgumentError(f"spark= is a pyspark.sql.SparkSession with a sparkContext (a classic session: "
                                   f"Spark Connect's has none), not {spark!r}")
    return context


@dataclass(frozen=True)
class _Raised:
    """A library error one Spark task raised, brought back as that task's result: Spark would wrap it in an error
    of its own, the executor's traceback as text."""

    error: CounterError


@dataclass(frozen=True)
class _Guarded(Generic[P]):
    """The work as Spark runs it: a library error becomes the task's result."""

    work: Callable[[Task], P]

    def __call__(self, task: Task) -> Union[P, _Raised]:
        try:
            return self.work(task)
        except CounterError as error:
            return _Raised(error)


@dataclass(frozen=True)
class _GuardedMerge(Generic[P]):
    """The merge as Spark runs it: an error brought back wins over any result."""

    merge: Callable[[P, P], P]

    def __call__(self, a: Union[P, _Raised], b: Union[P, _Raised]) -> Union[P, _Raised]:
        if isinstance(a, _Raised):
            return a
        if isinstance(b, _Raised):
            return b
        return self.merge(a, b)


_RAISED_KEY = ("pynamodb_counters", "raised")
"""The key a library error raised by the work travels under on Spark (no DynamoDB type is named so)."""


@dataclass(frozen=True)
class _GuardedPairs(Generic[K, V]):
    """The keyed work as Spark runs it: a task's values as pairs, a library error as one pair of its own."""

    work: Callable[[Task], Dict[K, V]]

    def __call__(self, task: Task) -> List[Tuple[Any, Any]]:
        try:
            return list(self.work(task).items())
        except CounterError as error:
            return [(_RAISED_KEY, _Raised(error))]


@dataclass(frozen=True)
class _GuardedJudge(Generic[V, R]):
    """The judgement as Spark runs it: an error brought back stays one, a library error raised becomes one."""

    judge: Callable[[V], R]

    def __call__(self, pair: Tuple[Any, Union[V, _Raised]]) -> Union[R, _Raised]:
        value = pair[1]
        if isinstance(value, _Raised):
            return value
        try:
            return self.judge(value)
        except CounterError as error:
            return _Raised(error)


_ABSENT: Any = object()


@dataclass(frozen=True)
class _ByKey(Generic[K, V]):
    """Two tasks' values by key, merged: a key's values combined (the first mapping, updated)."""

    combine: Callable[[V, V], V]

    def __call__(self, first: Dict[K, V], second: Dict[K, V]) -> Dict[K, V]:
        combine, mine = self.combine, first.get
        for key, value in second.items():  # the hot loop of a merge: a lookup of each key, one more if both hold it
            held = mine(key, _ABSENT)
            first[key] = value if held is _ABSENT else combine(held, value)
        return first
