"""
Benchmark: the instructions a counted ``save()`` executes against the same transaction written without this
library, counted by valgrind's callgrind: a figure that the machine's load does not move.

::

    python -m benchmarks.instructions             # 100 saves a path, about 3 minutes (valgrind is slow)
    python -m benchmarks.instructions --saves 200 --json i.json

The timing benchmark (``python -m benchmarks.overhead``) measures seconds, which a noisy machine spreads (its
per-round ratios reached 0.55-1.62 on one machine). This one counts the CPU instructions the same paths execute,
with the same canned responses (``overhead.CannedResponses``: no network, no engine), which is repeatable for the
same interpreter, packages and inputs whatever else the machine runs. The paths are the overhead benchmark's:

* **counted save()**: ``Like(...).save()``;
* **PynamoDB** (the baseline): the same Put and Update built with PynamoDB on the plain models and sent as one
  TransactWriteItems through the like model's own PynamoDB connection (``overhead.save_plain``);
* **PynamoDB TransactWrite**: the same transaction with PynamoDB's ``TransactWrite``;
* **minimal like by hand**: the least a user writes by hand with PynamoDB for a counted like: the like's Put with
  ``attribute_not_exists`` and an ``ADD 1`` to its post's counter with ``attribute_exists``, one
  TransactWriteItems through the like model's connection (no write id, sequence, feeder record or token:
  :func:`save_minimal`);
* **botocore: the counted request** and **botocore: the minimal request**: the very request the counted save
  sends, and the minimal like's, each captured once and then sent again and again through PynamoDB's botocore
  client: what botocore alone spends on each request (serializing, endpoint, signing, parsing the answer), so
  that the gap between the counted save and the minimal like splits into botocore's part (the counted request's
  larger body: the write id, sequence, feeder record, ``ALL_OLD``) and the library's own code.

Each path runs in its own process under ``valgrind --tool=callgrind`` twice (``PYTHONHASHSEED=0``): 20 saves to
warm up and then 50, and 20 and then 50 plus ``--saves``; the difference of the two totals, divided by
``--saves``, is the instructions a save costs once the interpreter, the imports and the first requests are paid
for. Each process checks that each save sent exactly one TransactWriteItems. Needs valgrind on PATH.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from benchmarks._shared import BenchmarkError, add_common_options, describe_machine, run_main, say, table

PATHS = ("counted save()", "PynamoDB", "PynamoDB TransactWrite", "minimal like by hand",
         "botocore: the counted request", "botocore: the minimal request")
BASELINE = "PynamoDB"
MINIMAL = "minimal like by hand"
REQUESTS = {"botocore: the counted request": "counted save()", "botocore: the minimal request": MINIMAL}
"""The two paths that send one request, built once, through botocore alone: what botocore spends on the counted
request's bytes against the minimal one's, apart from building either."""
WARM, FIRST = 20, 50
"""Saves to warm up, and the saves of the shorter of each path's two runs."""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TOTAL = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def save_minimal(like: Any) -> Any:
    """The minimal like written by hand with PynamoDB (:class:`~benchmarks._models.PlainLike` and its post): the
    like's create-only Put and an ``ADD 1`` to the post's ``like_tally`` guarded by the post's existence, as one
    TransactWriteItems through the like model's connection."""
    from pynamodb.constants import KEY

    from benchmarks._models import PlainLike, PlainPost

    put = like.get_save_kwargs_from_instance(condition=PlainLike.pk.does_not_exist())
    update = PlainPost._get_connection().get_operation_kwargs(
        like.pk, range_key="META", key=KEY, actions=[PlainPost.like_tally.add(1)], condition=PlainPost.pk.exists())
    return PlainLike._get_connection().connection.transact_write_items(
        condition_check_items=[], delete_items=[], put_items=[put], update_items=[update])


def child(path: str, saves: int) -> int:
    """One measured process: :data:`WARM` saves, then ``saves`` more, of ``path``; 1 unless each sent exactly one
    TransactWriteItems."""
    from benchmarks import overhead
    from benchmarks._models import NOWHERE, Like, PlainLike, PlainPost, Post
    from benchmarks._shared import point_models_at, use_dummy_credentials

    use_dummy_credentials()
    point_models_at([Post, Like, PlainPost, PlainLike], NOWHERE)  # never reached: every request is answered
    saves_of: Dict[str, Any] = {"counted save()": lambda like: like.save(), "PynamoDB": overhead.save_plain,
                                "PynamoDB TransactWrite": overhead.save_transact_write, MINIMAL: save_minimal}
    if path in REQUESTS:
        save = _resend(_captured(REQUESTS[path], saves_of[REQUESTS[path]]), PlainLike._get_connection())
        make = overhead.plain_likes
    else:
        save = saves_of[path]
        make = overhead.likes if path == "counted save()" else overhead.plain_likes
    with overhead.CannedResponses() as canned:
        for number, count in ((0, WARM), (1, saves)):
            for like in make(count, number, "i-"):
                save(like)
        sent = canned.by_operation.get("TransactWriteItems", 0)
    if sent != WARM + saves or canned.requests != sent:
        print(f"{WARM + saves} saves of {path} made {dict(canned.by_operation)}", file=sys.stderr)
        return 1
    return 0


def _captured(path: str, save: Any) -> Dict[str, Any]:
    """The parameters of the TransactWriteItems one save of ``path`` sends (its body, parsed)."""
    from benchmarks import overhead

    make = overhead.likes if path == "counted save()" else overhead.plain_likes
    with overhead.CannedResponses() as canned:
        canned.keep_bodies = True
        save(make(1, 0, "c-")[0])
    parameters: Dict[str, Any] = json.loads(canned.bodies[-1])
    return parameters


def _resend(parameters: Dict[str, Any], connection: Any) -> Any:
    """A save that sends ``parameters`` again through ``connection``'s botocore client, whatever like it is
    given."""
    client = connection.connection.client
    return lambda like: client.transact_write_items(**parameters)


def instructions(path: str, saves: int, folder: str) -> int:
    """The instructions one process of ``path`` with ``saves`` measured saves executes, as callgrind counts
    them."""
    out = os.path.join(folder, f"callgrind.{PATHS.index(path)}.{saves}")
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
               "benchmarks.instructions", "--child", path, str(saves)]
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, (ROOT, environment.get("PYTHONPATH"))))
    done = subprocess.run(command, env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchmarkError(f"{path}, {saves} saves under valgrind failed ({done.returncode}): "
                             f"{done.stderr.strip()[-400:]}")
    with open(out, encoding="utf-8") as counts:
        found = _TOTAL.search(counts.read())
    if found is None:
        raise BenchmarkError(f"no total in {out}")
    return int(found.group(1))


def run(options: argparse.Namespace) -> Dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise BenchmarkError("valgrind is not on PATH: this benchmark counts instructions with its callgrind tool "
                             "(Debian's package valgrind)")
    saves = options.saves or (30 if options.quick else 100)
    say(f"instructions benchmark: {saves} counted save() against the same transaction through PynamoDB, canned "
        f"responses, counted by callgrind; {describe_machine()}")
    started = time.perf_counter()
    per_save: Dict[str, float] = {}
    totals: Dict[str, List[int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for path in PATHS:
            short, long = instructions(path, FIRST, folder), instructions(path, FIRST + saves, folder)
            totals[path] = [short, long]
            per_save[path] = (long - short) / saves
    base = per_save[BASELINE]
    rows = [[path, f"{per_save[path]:,.0f}", f"{per_save[path] / base:.3f}x"] for path in PATHS]
    say(table(["path", "instructions a save", f"against {BASELINE}"], rows, align="lrr"))
    ratio = per_save[PATHS[0]] / base
    seconds = time.perf_counter() - started
    minimal = per_save[PATHS[0]] / per_save[MINIMAL]
    gap = per_save[PATHS[0]] - per_save[MINIMAL]
    bytes_gap = per_save["botocore: the counted request"] - per_save["botocore: the minimal request"]
    say(f"counted save() / {BASELINE} = {ratio:.3f}x in instructions; / {MINIMAL} = {minimal:.3f}x; "
        f"{seconds:.0f} s")
    say(f"the counted save's {gap:,.0f} instructions over the minimal like: {bytes_gap:,.0f} botocore sending the "
        f"larger request, {gap - bytes_gap:,.0f} the rest (building, the decision loop, the driver)")
    return {"instructions": {"saves": saves, "warm": WARM, "first": FIRST, "per_save": per_save,
                             "totals": totals, "ratio": ratio, "minimal_ratio": minimal, "seconds": seconds,
                             "gap": gap, "botocore_gap": bytes_gap}}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions",
                                     description="Instructions of a counted save() against the same transaction "
                                     "through PynamoDB, counted by valgrind's callgrind.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--saves", type=int, default=None, help="measured saves a path (default 100, quick 30)")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "SAVES"), help=argparse.SUPPRESS)
    add_common_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = parser().parse_args(argv)
    if options.child:
        return child(options.child[0], int(options.child[1]))
    return run_main(run, parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
