"""
The paths of counted writes through the package: which of its modules a write enters, how often it passes from
one to another, and how deep its calls go. Not a timing: a trace, the same on every machine.

::

    python -m benchmarks.paths            # three writes on moto in-process, a second or two
    python -m benchmarks.paths --json p.json

Each write runs once to warm up (the models' specs and their relations compiled, the held request shapes), then
once traced with :func:`sys.setprofile`: every call entering a module of ``pynamodb_counters`` is recorded, in
order. It reports, per write: the modules (files) entered, split into the write path and the declaration modules
(``declare/*`` and ``_keys``), which a warm write never calls into (it reads each model's compiled spec as plain
attributes, and runs the relations' functions itself); the transitions (a call in one module followed by a call
in another); and the deepest nesting of the package's own frames. The writes:

* **a new like's save**: ``Like(...).save()``;
* **an edit**: a bookmark loaded, moved to another user, saved (two relations, one of them moving);
* **an edit that publishes and moves**: a draft pin loaded, published on another board, saved (a ``when=``
  relation: nothing to take off the old board, one count added to the new);
* **a delete of an edited copy**: a bookmark loaded, edited in memory, deleted (counted off the stored one).
"""
from __future__ import annotations

import argparse
import os
import sys
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Sequence

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

import pynamodb_counters
from benchmarks._models import NOWHERE, REGION
from benchmarks._shared import say, table, use_dummy_credentials, write_json
from pynamodb_counters import CounterField, CounterMixin, counted_by

PACKAGE = os.path.dirname(pynamodb_counters.__file__)


def declaration(module: str) -> bool:
    """Whether ``module`` (as the trace names it) holds what the models declare (``declare/*``), or keys and
    requests as PynamoDB's versions build them (``_keys``): compiled into each model's spec, not asked again."""
    return module.startswith("declare.") or module == "_keys"


def _meta(table_name: str) -> Any:
    """A model's ``Meta``: its table, in the benchmarks' region, pointing nowhere until the run points it at moto."""
    return type("Meta", (), {"table_name": table_name, "region": REGION, "host": NOWHERE})


class Board(CounterMixin, Model):
    """A parent counting the pins published on it."""

    Meta = _meta("Boards")
    board_id = UnicodeAttribute(hash_key=True)
    published = CounterField()


class Pin(CounterMixin, Model):
    """Counted on its board while published (``when=``)."""

    Meta = _meta("Pins")
    pin_id = UnicodeAttribute(hash_key=True)
    board_id = UnicodeAttribute()
    status = UnicodeAttribute(default="draft")
    board = counted_by(Board.published, key=lambda pin: pin.board_id, when=lambda pin: pin.status == "published")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="accepted for python -m benchmarks; the same run")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    return parser


def trace(write: Callable[[], Any]) -> Dict[str, Any]:
    """Run ``write`` once under a profiler that records the package's modules, in call order."""
    modules: List[str] = []
    depth = [0, 0]  # now, deepest

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        path = frame.f_code.co_filename
        if not path.startswith(PACKAGE):
            return
        if event == "call":
            depth[0] += 1
            depth[1] = max(depth[1], depth[0])
            name = os.path.splitext(os.path.relpath(path, PACKAGE))[0].replace(os.sep, ".")
            if not modules or modules[-1] != name:
                modules.append(name)
        elif event == "return":
            depth[0] -= 1

    sys.setprofile(profile)
    try:
        write()
    finally:
        sys.setprofile(None)
    entered = sorted(set(modules))
    return {"modules": len(entered), "write_path": [m for m in entered if not declaration(m)],
            "declarations": [m for m in entered if declaration(m)], "transitions": len(modules) - 1,
            "depth": depth[1], "sequence": modules}


def run(options: argparse.Namespace) -> Dict[str, Any]:
    from moto import mock_aws

    with mock_aws():
        from benchmarks._models import Bookmark, Like, Post, User

        parents: Sequence[Any] = (Post, User, Board, Pin)
        for model in parents:
            model.Meta.host = None
            model._connection = None
            if not model.exists():
                model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        for model in (Like, Bookmark):
            model.Meta.host = None
            model._connection = None
        Post(pk="POST#p", sk="META").save()
        for user in ("u1", "u2", "u3"):
            User(user_id=user).save()
        for board in ("b1", "b2"):
            Board(board_id=board).save()
        likes = iter(range(10))

        def new_like() -> None:
            Like(pk="POST#p", sk=f"LIKE#USER#{next(likes)}", liked_at=1750636800).save()

        def bookmark(n: int) -> Any:
            Bookmark(pk="POST#p", sk=f"BOOKMARK#USER#{n}", user_id="u1").save()
            return Bookmark.get("POST#p", f"BOOKMARK#USER#{n}", consistent_read=True)

        def edit(n: int) -> Callable[[], None]:
            loaded = bookmark(n)
            loaded.user_id = "u2"
            return loaded.save  # type: ignore[no-any-return]

        def publish_and_move(n: int) -> Callable[[], None]:
            Pin(pin_id=f"PIN#{n}", board_id="b1").save()
            loaded = Pin.get(f"PIN#{n}", consistent_read=True)
            loaded.status, loaded.board_id = "published", "b2"
            return loaded.save

        def delete_edited(n: int) -> Callable[[], None]:
            loaded = bookmark(n)
            loaded.user_id = "u3"  # edited in memory only: the delete counts off the stored one
            return loaded.delete  # type: ignore[no-any-return]

        writes = {"a new like's save": (new_like, new_like), "an edit": (edit(1), edit(2)),
                  "an edit that publishes and moves": (publish_and_move(1), publish_and_move(2)),
                  "a delete of an edited copy": (delete_edited(3), delete_edited(4))}
        figures: Dict[str, Any] = {}
        for name, (warm, traced) in writes.items():
            warm()
            figures[name] = trace(traced)
    rows = [[name, str(f["modules"]), str(len(f["declarations"])), str(f["transitions"]), str(f["depth"]),
             ", ".join(f["write_path"] + f["declarations"])] for name, f in figures.items()]
    say(table(["write", "modules", "of them declarations", "transitions", "depth", "modules entered"], rows,
              align="lrrrrl"))
    result = {"paths": figures}
    if options.json:
        write_json(options.json, result)
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    use_dummy_credentials()
    run(parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
