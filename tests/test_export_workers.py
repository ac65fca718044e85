"""What the local engine's worker processes need of the caller's models when an audit reads an export: they are
started by forkserver (spawn on Windows), never forked, so they are given what reading a data file needs as plain
values, and import a model only for a relation counted with ``when=`` or ``amount=`` (it loads each child). Models
made inside a function are audited on any number of workers, but for such a relation, which is refused before any
worker starts, naming the fix; models of a script's ``__main__`` are audited when the script guards its work with
``if __name__ == "__main__":``, and a script that does not is told so."""
from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, audit, counted_by, skip_counting
from pynamodb_counters.exceptions import ExportError
from pynamodb_counters.reconcile.export import _engines
from pynamodb_counters.testing import export_table

pytestmark = pytest.mark.usefixtures("dynamodb")


def made_models() -> Tuple[Any, Any, Any]:
    """A board, its pins (each counts one) and its votes (each adds its weight), made inside a function: pickle
    cannot find them by their module and name."""

    class Board(CounterMixin, Model):
        class Meta:
            table_name = "MadeBoards"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        pins = CounterField()
        weight = CounterField()

        @classmethod
        def audit_filter(cls) -> Any:
            return cls.sk == "META"

    class Pin(CounterMixin, Model):
        class Meta:
            table_name = "MadeBoards"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        board = counted_by(Board.pins, key=lambda pin: (pin.pk, "META"), prefix="PIN#")

    class Vote(CounterMixin, Model):
        class Meta:
            table_name = "MadeBoards"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        stars = NumberAttribute()
        board = counted_by(Board.weight, key=lambda vote: (vote.pk, "META"), prefix="VOTE#",
                           amount=lambda vote: int(vote.stars))

    return Board, Pin, Vote


Board, Pin, Vote = made_models()


@pytest.fixture
def counters_models() -> List[type]:
    return [Board]


def pinned(directory: Path) -> str:
    """Three boards with pins and votes, counted; the second board's pins and weight one short, and an export."""
    for b in range(3):
        Board(pk=f"BOARD#{b}", sk="META").save()
        for p in range(b + 2):
            Pin(pk=f"BOARD#{b}", sk=f"PIN#{p}").save()
            Vote(pk=f"BOARD#{b}", sk=f"VOTE#{p}", stars=p + 1).save()
    with skip_counting():
        Pin(pk="BOARD#1", sk="PIN#extra").save()
        Vote(pk="BOARD#1", sk="VOTE#extra", stars=1).save()
    return export_table(Board, directory, files=4)


def test_the_models_are_made_inside_a_function_and_cannot_be_pickled() -> None:
    assert "<locals>" in Pin.__qualname__
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(Pin)


def test_models_made_inside_a_function_are_audited_from_an_export_on_several_workers(tmp_path: Path) -> None:
    export = pinned(tmp_path)
    one, two = (audit(Board.pins, export=export, workers=workers) for workers in (1, 2))
    for report in (one, two):
        assert [(drift.key, drift.stored, drift.actual) for drift in report.drifts] == [(("BOARD#1", "META"), 3, 4)]
        assert report.parents_checked == 3


def test_a_relation_counted_with_amount_on_models_made_inside_a_function_is_refused_naming_the_fix(
        tmp_path: Path) -> None:
    export = pinned(tmp_path)
    with pytest.raises(ExportError, match=r"^Vote\.board counts with when= or amount=, functions of the loaded Vote: "
                                          r"the worker processes reading the export load its models by their module "
                                          r"and name, and tests\.test_export_workers\.made_models\.<locals>\.Board "
                                          r"cannot be imported so \(a class made inside a function, or in an "
                                          r"interactive session\?\)\. Declare the models at the top level of a "
                                          r"module, or audit with workers=1 to read the export in this process$"):
        audit(Board.weight, export=export, workers=2)
    report = audit(Board.weight, export=export, workers=1)
    assert [(drift.key, drift.stored, drift.actual) for drift in report.drifts] == [(("BOARD#1", "META"), 6, 7)]


SCRIPT = '''
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_counters import CounterField, CounterMixin, audit, counted_by
from pynamodb_counters.testing import write_export


class Board(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    weight = CounterField()


class Vote(CounterMixin, Model):
    class Meta:
        table_name = "Boards"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    stars = NumberAttribute()
    board = counted_by(Board.weight, key=lambda vote: (vote.pk, "META"), prefix="VOTE#",
                       amount=lambda vote: int(vote.stars))


def main():
    items = []
    for b in range(4):
        items.append({{"pk": {{"S": f"BOARD#{{b}}"}}, "sk": {{"S": "META"}}, "weight": {{"N": str(3 * b)}}}})
        items.extend({{"pk": {{"S": f"BOARD#{{b}}"}}, "sk": {{"S": f"VOTE#{{v}}"}}, "stars": {{"N": "3"}}}}
                     for v in range(b))
    export = write_export({directory!r}, items, table_arn="arn:aws:dynamodb:us-east-1:123456789012:table/Boards")
    report = audit(Board.weight, export=export, workers=2, export_of_copy=True)
    print("parents", report.parents_checked, "candidates", len(report.candidates))

{call}
'''


def raised(stderr: str) -> str:
    """The line of a script's standard error naming the error that ended it (``multiprocessing``'s resource
    tracker may warn after it, of the semaphores the workers' aborted pools left)."""
    return next((line for line in stderr.splitlines() if line.startswith("pynamodb_counters.exceptions.")), stderr)


def run_script(directory: Path, call: str) -> subprocess.CompletedProcess[str]:
    script = directory / "count_boards.py"
    script.write_text(SCRIPT.format(directory=str(directory / "exports"), call=call))
    return subprocess.run([sys.executable, str(script)], cwd=directory, capture_output=True, text=True, timeout=120)


def test_models_of_a_guarded_main_script_are_audited_on_several_workers(tmp_path: Path) -> None:
    done = run_script(tmp_path, 'if __name__ == "__main__":\n    main()')
    assert (done.returncode, done.stdout) == (0, "parents 4 candidates 0\n"), done.stderr


def test_a_main_script_auditing_at_its_top_level_is_told_to_guard_it(tmp_path: Path) -> None:
    done = run_script(tmp_path, "main()")
    assert done.returncode == 1 and done.stdout == ""
    message = raised(done.stderr)
    assert message.startswith("pynamodb_counters.exceptions.ExportError: a worker process of the local engine ended "
                              "before its task did"), done.stderr
    assert (f"The workers are started by {_engines.START_METHOD} and import the script that called the audit again "
            f'(__main__): a script that audits at its top level must do it under if __name__ == "__main__": (else '
            f"each worker runs it again). Or pass workers=1 to read in this process") in message


def test_models_of_an_interactive_main_counted_with_amount_are_refused_naming_the_fix(tmp_path: Path) -> None:
    """``python -c``, a REPL, a notebook: no worker runs their ``__main__`` again, so none could find the models."""
    code = SCRIPT.format(directory=str(tmp_path / "exports"), call="main()")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert raised(done.stderr) == (
        "pynamodb_counters.exceptions.ExportError: Vote.board counts with when= or amount=, functions of the loaded "
        "Vote: the worker processes reading the export load its models by their module and name, and "
        "__main__.Board cannot be imported so (a class made inside a function, or in an interactive session?). "
        "Declare the models at the top level of a module, or audit with workers=1 to read the export in this "
        "process")
