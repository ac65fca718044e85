"""
The paths of counted writes through the package: which of its modules a write enters, how often it passes from
one to another, and how deep its calls go. Not a timing: a trace, the same on every machine.

::

    python -m benchmarks.paths            # three writes on moto in-process, a second or two
    python -m benchmarks.paths --json p.json

Each write runs once to warm up (the models' specs, the held request shapes), then once traced with
:func:`sys.setprofile`: every call entering a module of ``pynamodb_counters`` is recorded, in order. It reports,
per write: the modules entered (split into the write path and the declarations it looks up: ``declare._relations``,
``declare._attributes``, ``declare._spec``, ``declare._base``, ``_compat``, ``write._context``), the
transitions (a call in one module followed by a call in another), and the deepest nesting of the package's own
frames. The writes:

* **a new like's save**: ``Like(...).save()``;
* **an edit**: a bookmark loaded, moved to another user, saved (two relations, one of them moving);
* **a delete of an edited copy**: a bookmark loaded, edited in memory, deleted (counted off the stored one).
"""
from __future__ import annotations

import argparse
import os
import sys
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Sequence

import pynamodb_counters
from benchmarks._shared import say, table, use_dummy_credentials, write_json

PACKAGE = os.path.dirname(pynamodb_counters.__file__)
DECLARATIONS = frozenset(("declare._relations", "declare._attributes", "declare._spec", "declare._base", "_compat",
                          "write._context"))
"""The modules that hold what the models declare, looked up along the way, not steps of the write itself."""


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
    return {"modules": len(entered), "write_path": [m for m in entered if m not in DECLARATIONS],
            "declarations": [m for m in entered if m in DECLARATIONS], "transitions": len(modules) - 1,
            "depth": depth[1], "sequence": modules}


def run(options: argparse.Namespace) -> Dict[str, Any]:
    from moto import mock_aws

    with mock_aws():
        from benchmarks._models import Bookmark, Like, Post, User

        for model in (Post, User):
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

        def delete_edited(n: int) -> Callable[[], None]:
            loaded = bookmark(n)
            loaded.user_id = "u3"  # edited in memory only: the delete counts off the stored one
            return loaded.delete  # type: ignore[no-any-return]

        writes = {"a new like's save": (new_like, new_like), "an edit": (edit(1), edit(2)),
                  "a delete of an edited copy": (delete_edited(3), delete_edited(4))}
        figures: Dict[str, Any] = {}
        for name, (warm, traced) in writes.items():
            warm()
            figures[name] = trace(traced)
    rows = [[name, str(f["modules"]), str(len(f["write_path"])), str(f["transitions"]), str(f["depth"]),
             ", ".join(f["write_path"])] for name, f in figures.items()]
    say(table(["write", "modules", "of the write path", "transitions", "depth", "write path"], rows,
              align="lrrrrl"))
    say(f"declarations looked up along the way: {', '.join(sorted(DECLARATIONS))}")
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
