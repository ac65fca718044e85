"""The state of the "Boards" table of :mod:`tests.support.stream_models` as the stream tests read it: boards made,
the table's stream read and counted as a Lambda receives it, and every counter of a board, as stored and as a
recount of its pins and notes gives it."""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

from pynamodb_counters.streams import StreamResult, count_stream
from pynamodb_counters.testing import lambda_event, stream_records
from tests.support.stream_models import Board, DailyPins, Folder, Note, Pin

BOARDS = ["BOARD#b1", "BOARD#b2", "BOARD#b3"]


def boards(*pks: str) -> None:
    """The boards ``pks`` (default :data:`BOARDS`), each with its folders "inbox" and "art"."""
    for pk in pks or BOARDS:
        Board(pk=pk, sk="META").save()
        for name in ("inbox", "art"):
            Folder(pk=pk, sk=f"FOLDER#{name}").save()


def stream(after: Optional[str] = None) -> List[Dict[str, Any]]:
    """The Boards stream's records (after the sequence number ``after``), as GetRecords returns them."""
    return stream_records(Board, after=after)


def count(records: Sequence[Dict[str, Any]]) -> StreamResult:
    """``count_stream`` on ``records``, as a Lambda on the stream receives them."""
    return count_stream(lambda_event(records, Board), models=[Pin, Note])


def recount(pk: str) -> Dict[str, Any]:
    """What every counter of board ``pk`` should hold, from the pins stored."""
    pins = list(Pin.query(pk, Pin.sk.startswith("PIN#"), consistent_read=True))
    notes = list(Note.query(pk, Note.sk.startswith("NOTE#"), consistent_read=True))
    return {"pin_count": len(pins), "stars": sum(int(pin.rating) for pin in pins),
            "published": sum(pin.status == "published" for pin in pins), "views": len(pins),
            "note_count": len(notes), "note_words": sum(int(note.words) for note in notes),
            "folders": dict(Counter(pin.folder for pin in pins)), "days": dict(Counter(pin.day for pin in pins))}


def stored(pk: str) -> Dict[str, Any]:
    """What the counters of board ``pk`` hold."""
    board = Board.get(pk, "META", consistent_read=True)
    folders = {folder.sk[len("FOLDER#"):]: folder.pin_count
               for folder in Folder.query(pk, Folder.sk.startswith("FOLDER#"), consistent_read=True)}
    days = {day.sk[len("DAY#"):]: day.pins
            for day in DailyPins.query(pk, DailyPins.sk.startswith("DAY#"), consistent_read=True)}
    return {"pin_count": board.pin_count, "stars": board.stars, "published": board.published,
            "views": Board.views.total((pk, "META"), consistent_read=True), "note_count": board.note_count,
            "note_words": board.note_words, "folders": {name: n for name, n in folders.items() if n},
            "days": {day: n for day, n in days.items() if n}}


def exact(*pks: str) -> None:
    """Every counter of the boards ``pks`` (default :data:`BOARDS`) equals its recount."""
    for pk in pks or BOARDS:
        assert stored(pk) == recount(pk), pk
