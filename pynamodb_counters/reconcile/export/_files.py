"""
Reading a DynamoDB table export (``ExportTableToPointInTime``) as AWS writes it, in S3 or copied to a directory::

    <prefix>/AWSDynamoDB/<ExportId>/manifest-summary.json   the table (tableArn, tableId), itemCount, outputFormat,
                                                            exportType
    <prefix>/AWSDynamoDB/<ExportId>/manifest-files.json     a JSON line per data file: itemCount, md5Checksum,
                                                            etag, dataFileS3Key
    <prefix>/AWSDynamoDB/<ExportId>/data/<random>.json.gz   a line per item: {"Item": {...}} in DynamoDB's typed JSON

:func:`open_export` reads and checks the manifests; :meth:`Export.read` streams one data file's items and, at the
file's end, checks its MD5 and item count against the manifest. Every fault is an
:class:`~pynamodb_counters.exceptions.ExportError` naming the file.

An :class:`Export` and its :class:`DataFile` entries are plain data: they pickle, for process pools and Spark
executors. Where the files are read from, a directory or S3 (and the S3 client each process makes), is
``_sources``.

A ``dataFileS3Key`` is written relative to the bucket (``<prefix>/AWSDynamoDB/<ExportId>/data/...``); it is read
by its part after ``AWSDynamoDB/<ExportId>/``, under the location given, so a copy of an export (to a directory, or
under another prefix) reads like the original.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import importlib
import io
import json
import os
import re
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, cast

from botocore.exceptions import BotoCoreError

from ...exceptions import ExportError, InvalidArgumentError
from ._sources import ROOT, SUMMARY, Missing, Source, source_of

__all__ = ["FILES_MANIFEST", "DataFile", "Export", "open_export", "table_of", "table_place"]

FILES_MANIFEST = "manifest-files.json"

#: decompressed bytes parsed at a time: what a read holds at once, whatever the file's size
_CHUNK = 64 * 1024
#: the longest line a read holds: an item is at most 400 KB, its DynamoDB JSON a few times that
_LONGEST_LINE = 16 * 1024 * 1024
_TABLE_ARN = re.compile(r"^arn:[\w-]+:dynamodb:([\w-]*):(\d*):table/([\w.-]+)$")
_ITEM_SHAPE = '{"Item": {...}}'


def _decoder() -> Callable[[str], Any]:
    """``orjson.loads`` where orjson is installed (optional: parsing is the hot loop of a large audit), else the
    standard library's decoder."""
    try:
        return cast(Callable[[str], Any], importlib.import_module("orjson").loads)
    except ImportError:
        return json.JSONDecoder().decode


_decode = _decoder()


@dataclass(frozen=True)
class DataFile:
    """One data file of an export, as ``manifest-files.json`` lists it."""

    key: str
    """The manifest's ``dataFileS3Key``, as written (``<prefix>/AWSDynamoDB/<ExportId>/data/<random>.json.gz``)."""
    items: int
    """The manifest's ``itemCount`` for it."""
    md5: str
    """The manifest's ``md5Checksum`` for it: the base64 MD5 digest of the ``.json.gz`` object."""


@dataclass(frozen=True)
class Export:
    """A full DynamoDB JSON export of one table, its manifests read and checked by :func:`open_export`."""

    location: str
    """What the caller gave: ``"s3://bucket/prefix/AWSDynamoDB/<ExportId>/"`` or a local directory."""
    table: str
    """The table exported, from ``manifest-summary.json``'s ``tableArn``."""
    table_arn: str
    """``manifest-summary.json``'s ``tableArn``: the table's account and region too."""
    table_id: Optional[str]
    """``manifest-summary.json``'s ``tableId`` (DynamoDB's ``TableId``, new each time a table is created); ``None``
    for an export made by hand without one."""
    item_count: int
    """``manifest-summary.json``'s ``itemCount``: the sum of the files' counts."""
    files: Tuple[DataFile, ...]
    exported_at: Optional[float] = None
    """``manifest-summary.json``'s ``exportTime`` (the point in time exported), in seconds since the epoch;
    ``None`` where the summary gives none that can be read."""

    def read(self, file: DataFile) -> Iterator[Dict[str, Any]]:
        """The file's items, raw (DynamoDB typed JSON: ``{"pk": {"S": ...}, ...}``), streamed: decompressed and
        parsed a piece at a time, never the whole file in memory. At the end of the file its MD5 and item count
        are checked against the manifest.

        :raises ExportError: naming the file: it is missing, not a whole gzip file, holds a line that is not
          ``{"Item": {...}}`` (the items before it were given), or, at its end, its MD5 or its item count differs
          from the manifest.
        """
        source = source_of(self.location)
        relative = _relative(file.key)
        if relative is None:
            raise ExportError(f"{file.key!r} is not the dataFileS3Key of a data file of the export at "
                              f"{self.location}")
        return _items(source, relative, file)


def open_export(location: str) -> Export:
    """Read and check an export's manifests (``manifest-summary.json``, ``manifest-files.json``): a full export
    (``FULL_EXPORT``) in DynamoDB JSON, whose files are all there, each listed once, and whose counts add up.

    :param location: the export's own folder, where DynamoDB wrote its manifests:
      ``"s3://bucket/prefix/AWSDynamoDB/<ExportId>/"``, or a local copy of it.
    :raises ExportError: naming the file (or the location) and what is wrong.
    """
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str):
        raise InvalidArgumentError(f"open_export() takes the export's location, an s3:// URL or a directory, not "
                                   f"{location!r}")
    source = source_of(location)
    summary_name = source.name(SUMMARY)
    summary = _json_object(source, SUMMARY, _no_export(source))
    _check_format(summary, summary_name)
    arn = summary.get("tableArn")
    table = table_of(arn)
    if table is None:
        raise ExportError(f"{summary_name}: tableArn {arn!r} is not a DynamoDB table's ARN "
                          f"(arn:aws:dynamodb:<region>:<account>:table/<name>)")
    table_id = summary.get("tableId")
    if table_id is not None and not (isinstance(table_id, str) and table_id):
        raise ExportError(f"{summary_name}: tableId {table_id!r} is not a table's id (DynamoDB writes the table's "
                          f"TableId, a UUID)")
    item_count = summary.get("itemCount")
    if not _is_count(item_count):
        raise ExportError(f"{summary_name}: itemCount {item_count!r} is not a count of items")
    listed = summary.get("manifestFilesS3Key")
    files_relative = _relative(listed) if isinstance(listed, str) else FILES_MANIFEST
    if files_relative is None:
        raise ExportError(f"{summary_name}: manifestFilesS3Key {listed!r} is not a file of the export")
    files = _data_files(source, files_relative)
    files_name = source.name(files_relative)
    total = sum(file.items for file in files)
    if total != item_count:
        raise ExportError(f"{files_name} lists {total} items in {len(files)} files, but {summary_name} says the "
                          f"export of table {table} holds {item_count}: the manifests do not belong together, or "
                          f"one was changed; copy the export again, or take a new one")
    missing = source.missing([cast(str, _relative(file.key)) for file in files])  # each checked by _data_files
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ExportError(f"{source.name(missing[0])}{more} is listed in {files_name} but missing: the export is "
                          f"incomplete (copied in part?); copy it whole, or take a new export")
    return Export(location, table, cast(str, arn), table_id, cast(int, item_count), files,
                  _seconds(summary.get("exportTime")))


def _seconds(stamp: Any) -> Optional[float]:
    """A manifest's time (``2020-11-04T07:28:34.028Z``) in seconds since the epoch, else ``None``."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def table_of(arn: Any) -> Optional[str]:
    """The table name in a table's ARN (``arn:aws:dynamodb:<region>:<account>:table/<name>``), else ``None``."""
    place = table_place(arn)
    return place[2] if place else None


def table_place(arn: Any) -> Optional[Tuple[str, str, str]]:
    """The region, account and name of the table a table's ARN names, else ``None``."""
    found = _TABLE_ARN.match(arn) if isinstance(arn, str) else None
    return (found.group(1), found.group(2), found.group(3)) if found else None


def _check_format(summary: Dict[str, Any], name: str) -> None:
    """Refuse what is not a full export in DynamoDB JSON."""
    output = summary.get("outputFormat")
    if output == "ION":
        raise ExportError(f"{name}: an ION export (outputFormat ION); exports are read in DynamoDB JSON: take the "
                          f"export with --export-format DYNAMODB_JSON (ExportFormat='DYNAMODB_JSON', the default)")
    if output != "DYNAMODB_JSON":
        raise ExportError(f"{name}: outputFormat is {output!r}, not DYNAMODB_JSON, the format exports are read in: "
                          f"take the export with --export-format DYNAMODB_JSON")
    kind = summary.get("exportType", "FULL_EXPORT")
    if kind == "INCREMENTAL_EXPORT":
        raise ExportError(f"{name}: an incremental export (exportType INCREMENTAL_EXPORT) holds changes, not the "
                          f"table: a full export is needed (--export-type FULL_EXPORT, the default)")
    if kind != "FULL_EXPORT":
        raise ExportError(f"{name}: exportType is {kind!r}; a full export is needed (exportType FULL_EXPORT)")


def _data_files(source: Source, relative: str) -> Tuple[DataFile, ...]:
    """The entries of ``manifest-files.json``, each checked."""
    name = source.name(relative)
    text = _text(source, relative, f"{name} is missing: DynamoDB writes it beside {SUMMARY}, which names it; copy "
                                   f"the export whole")
    files: List[DataFile] = []
    lines: Dict[str, int] = {}  # the line listing each file
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not (isinstance(entry, dict) and _is_count(entry.get("itemCount"))
                and isinstance(entry.get("md5Checksum"), str) and isinstance(entry.get("dataFileS3Key"), str)):
            raise ExportError(f"{name}, line {number}: not a manifest entry as DynamoDB writes it "
                              f'({{"itemCount": ..., "md5Checksum": ..., "dataFileS3Key": ...}}): {line[:200]!r}')
        key = entry["dataFileS3Key"]
        if _relative(key) is None:
            raise ExportError(f"{name}, line {number}: dataFileS3Key {key!r} is not a file inside the export "
                              f"({ROOT}/<ExportId>/data/...)")
        first = lines.setdefault(cast(str, _relative(key)), number)
        if first != number:
            raise ExportError(f"{name}, line {number}: dataFileS3Key {key!r} is listed twice (line {first} too): its "
                              f"items would be read twice; DynamoDB lists each data file once: copy the export "
                              f"again, or take a new one")
        files.append(DataFile(key, entry["itemCount"], entry["md5Checksum"]))
    return tuple(files)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _relative(key: str) -> Optional[str]:
    """A key's path inside its export: its part after ``AWSDynamoDB/<ExportId>/`` (a key without that part is taken
    as such a path already); ``None`` for a path that would leave the export."""
    start = key.rfind(f"{ROOT}/")
    if start >= 0:
        slash = key.find("/", start + len(ROOT) + 1)
        key = key[slash + 1:] if slash >= 0 else ""
    parts = key.split("/")
    if not key or any(part in ("", ".", "..") for part in parts) or "\\" in key:
        return None
    return key


def _json_object(source: Source, relative: str, missing: str) -> Dict[str, Any]:
    name = source.name(relative)
    try:
        found = json.loads(_text(source, relative, missing))
    except ValueError as error:
        raise ExportError(f"{name} is not JSON ({error}): not a manifest as DynamoDB writes it", cause=error) \
            from error
    if not isinstance(found, dict):
        raise ExportError(f"{name} is not a JSON object: not a manifest as DynamoDB writes it")
    return found


def _text(source: Source, relative: str, missing: str) -> str:
    """A small file of the export (a manifest), whole, as text."""
    name = source.name(relative)
    try:
        stream = source.open(relative)
        try:
            data = stream.read()
        finally:
            stream.close()
    except Missing as error:
        raise ExportError(f"{missing}{error.said}") from None
    except (OSError, BotoCoreError) as error:
        raise ExportError(f"{name} cannot be read: {error}", cause=error) from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ExportError(f"{name} is not UTF-8 text: not a manifest as DynamoDB writes it", cause=error) \
            from error


def _no_export(source: Source) -> str:
    message = (f"no {SUMMARY} at {source.name(SUMMARY)}: an export's location is its own folder, "
               f"<prefix>/{ROOT}/<ExportId>/, where DynamoDB writes its manifests")
    below = source.exports_below()
    return f"{message}; exports found below it: {', '.join(below)}" if below else message


# -- the data files ----------------------------------------------------------------------------------------------
class _Hashing:
    """A binary stream whose bytes are hashed (MD5) as they are read."""

    __slots__ = ("_stream", "md5")

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.md5 = hashlib.md5(usedforsecurity=False)

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.md5.update(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        raise io.UnsupportedOperation("a data file is read once, from its start")


def _items(source: Source, relative: str, file: DataFile) -> Iterator[Dict[str, Any]]:
    """The items of one data file, streamed; its MD5 and item count checked at its end."""
    name = source.name(relative)
    try:
        stream = source.open(relative)
    except Missing as error:
        raise ExportError(f"{name} is listed in {FILES_MANIFEST} but missing{error.said}: the export is incomplete "
                          f"(copied in part?); copy it whole, or take a new export") from None
    except (OSError, BotoCoreError) as error:
        raise ExportError(f"{name} cannot be read: {error}", cause=error) from error
    count = 0
    try:
        hashing = _Hashing(stream)
        with gzip.GzipFile(fileobj=hashing, mode="rb") as unzipped:
            rest = b""
            while True:
                chunk = _unzipped(unzipped, name)
                if not chunk:
                    break
                block = rest + chunk
                end = block.rfind(b"\n")
                if end < 0:
                    rest = block
                    if len(rest) > _LONGEST_LINE:
                        raise ExportError(f"{name}, line {count + 1}: over {_LONGEST_LINE} bytes long, more than any "
                                          f"item's line: not a data file of a DynamoDB JSON export")
                    continue
                rest = block[end + 1:]
                yield from _parse(block[:end], name, count)
                count += block.count(b"\n", 0, end) + 1
            if rest:
                yield from _parse(rest, name, count)
                count += 1
        while hashing.read(_CHUNK):  # whatever follows the gzip data is part of the object too
            pass
    finally:
        stream.close()
    digest = base64.b64encode(hashing.md5.digest()).decode("ascii")
    if digest != file.md5:
        raise ExportError(f"{name}: its MD5 is {digest}, but {FILES_MANIFEST} lists {file.md5}: the file changed "
                          f"after the export, or was damaged; copy it again, or take a new export")
    if count != file.items:
        raise ExportError(f"{name} holds {count} items, but {FILES_MANIFEST} says {file.items}: the manifest does "
                          f"not belong to this file; copy the export again, or take a new one")


def _unzipped(unzipped: gzip.GzipFile, name: str) -> bytes:
    try:
        return unzipped.read(_CHUNK)
    except (OSError, EOFError, zlib.error) as error:
        raise ExportError(f"{name} is not a whole gzip file ({error}): it is truncated or corrupt; copy it again, or "
                          f"take a new export", cause=error) from error
    except BotoCoreError as error:
        raise ExportError(f"{name}: reading it failed ({error})", cause=error) from error


def _parse(block: bytes, name: str, before: int) -> Iterator[Dict[str, Any]]:
    """The items of complete lines (``block``, without its last newline): the hot loop of an audit, so each line is
    checked with as little as it takes. ``before`` lines of the file came before it."""
    try:
        lines: Iterable[str] = block.decode("utf-8").split("\n")
    except UnicodeDecodeError:  # a line that is not UTF-8: the lines before it are items still
        lines = (line.decode("utf-8") for line in block.split(b"\n"))
    try:
        for record in map(_decode, lines):
            if type(record) is dict and len(record) == 1:
                item = record.get("Item")
                if type(item) is dict:
                    yield item
                    continue
            raise ValueError("not an item")
    except ValueError:  # the decoders' errors too
        raise _bad_line(block, name, before) from None


def _bad_line(block: bytes, name: str, before: int) -> ExportError:
    """The error for the first line of ``block`` that is not ``{"Item": {...}}``."""
    for number, line in enumerate(block.split(b"\n"), before + 1):
        try:
            record = _decode(line.decode("utf-8"))
        except ValueError:
            record = None
        if type(record) is dict and len(record) == 1 and type(record.get("Item")) is dict:
            continue
        shown = line[:120].decode("utf-8", errors="replace")
        if isinstance(record, dict) and ("NewImage" in record or "OldImage" in record):
            return ExportError(f"{name}, line {number}: a change of an incremental export (NewImage, OldImage), "
                               f"not an item: a full export is needed (--export-type FULL_EXPORT, the default)")
        return ExportError(f"{name}, line {number}: not an item as a DynamoDB JSON export writes it "
                           f"({_ITEM_SHAPE}): {shown!r}")
    raise AssertionError("a block that failed holds a bad line")  # pragma: no cover
