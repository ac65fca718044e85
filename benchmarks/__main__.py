"""
Every benchmark of the write and read paths, in turn: ``python -m benchmarks``.

::

    python -m benchmarks                        # all five parts, about 100 s on 2 cores
    python -m benchmarks --quick                # smaller runs, about 1 minute
    python -m benchmarks --only bulk reads      # some parts
    python -m benchmarks --json figures.json    # also write every figure as JSON

The parts (each also runs alone, ``python -m benchmarks.NAME --help``):

* ``overhead``: CPU of a counted ``save()`` against the same transaction sent through PynamoDB without this
  library (canned responses);
* ``roundtrips``: requests per counted write (1 and 2 relations) and per 1,000 children in bulk;
* ``bulk``: 10,000 likes across 100 posts with ``bulk_save()`` against one PynamoDB transaction per like;
* ``reads``: a stored counter (GetItem; a 16-shard counter's ``total()``, one BatchGetItem) against a counting
  Query of likes stored without this library;
* ``paths``: the modules a counted write passes through (a trace, not a timing).

The audit benchmark (``python -m benchmarks.audit``) runs on its own: it takes about 5 minutes more. So does the
export audit benchmark (``python -m benchmarks.export_audit``: a 1,000,000-item export against the floor of
reading it, Spark ``local[2]`` beside it, and the live Scan audit; 10 to 15 minutes).
The instruction count of the overhead benchmark's paths (``python -m benchmarks.instructions``, under valgrind's
callgrind: about 4 minutes) runs on its own too.
So do the stream benchmarks: ``python -m benchmarks.stream`` (a like counted from the stream against the
transaction and the aggregator by hand) and ``python -m benchmarks.stream_audit`` (an audit of a counter fed from
the stream while likes wait, against the plain recount).
A part that fails its own checks is reported, the others still run, and the exit status is 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from types import ModuleType
from typing import Any, Dict, List, Optional, Sequence

from benchmarks import bulk, overhead, paths, reads, roundtrips
from benchmarks._shared import BenchmarkError, machine, now, say, table, use_dummy_credentials, write_json

PARTS: Dict[str, ModuleType] = {"overhead": overhead, "roundtrips": roundtrips, "bulk": bulk, "reads": reads,
                                "paths": paths}


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description="Run the write and read benchmarks in turn, each with its "
                                     "defaults (or --quick). Each part runs alone too: python -m benchmarks.NAME.")
    parser.add_argument("--quick", action="store_true", help="smaller runs of every part")
    parser.add_argument("--only", nargs="+", choices=list(PARTS), metavar="NAME",
                        help=f"run only these parts ({', '.join(PARTS)})")
    parser.add_argument("--json", metavar="PATH", help="also write every part's figures as JSON to PATH")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = parse(argv)
    use_dummy_credentials()
    names = [name for name in PARTS if not options.only or name in options.only]
    figures: Dict[str, Any] = {"generated_at": now(), "machine": machine(),
                               "command": "python -m benchmarks " + " ".join(argv if argv is not None
                                                                             else sys.argv[1:]),
                               "parts": {}, "seconds": {}, "failed": {}}
    started_all = time.perf_counter()
    for name in names:
        module = PARTS[name]
        part_options = module.parser().parse_args(["--quick"] if options.quick else [])
        say(f"\n=== {name} " + "=" * (100 - len(name)))
        started = time.perf_counter()
        try:
            figures["parts"].update(module.run(part_options))
        except BenchmarkError as error:
            figures["failed"][name] = str(error)
            print(f"benchmark {name} failed: {error}", file=sys.stderr, flush=True)
        figures["seconds"][name] = time.perf_counter() - started
    figures["seconds"]["total"] = time.perf_counter() - started_all
    say("\n=== summary " + "=" * 93)
    rows: List[List[str]] = [[name, "FAILED" if name in figures["failed"] else "ok", f"{figures['seconds'][name]:.1f}"]
                             for name in names]
    rows.append(["total", "", f"{figures['seconds']['total']:.1f}"])
    say(table(["part", "checks", "seconds"], rows, align="llr"))
    if options.json:
        write_json(options.json, figures)
    return 1 if figures["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
