"""
Table exports for tests: a table (moto or real) written in the layout DynamoDB's ``ExportTableToPointInTime``
writes to S3, which moto does not write (it writes one ``.gz`` object and no manifests).

::

    root = export_table(Post, tmp_path)      # tmp_path/AWSDynamoDB/<ExportId>, what an export's location is
    report = audit(Post.like_tally, export=root)

:func:`write_export` writes the same layout from items given, without a table: for exports larger than moto
holds quickly.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import re
import secrets
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from pynamodb.models import Model

from .._costs import item_bytes
from ..exceptions import InvalidArgumentError
from ..reconcile.export._files import FILES_MANIFEST, table_of
from ..reconcile.export._sources import ROOT, SUMMARY

__all__ = ["export_table", "write_export"]

_EXPORT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: lines gathered for a data file before they are compressed together
_BATCH = 512
#: an item's line, compact and in UTF-8 as DynamoDB writes it
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def export_table(model: type, directory: Union[str, os.PathLike[str]], *, files: int = 4,
                 export_id: Optional[str] = None) -> str:
    """Read ``model``'s whole table (a strongly consistent Scan through the model's own connection: moto or real,
    whatever the model points at) and write it as DynamoDB exports a table to S3, under ``directory``
    (see :func:`write_export`). Every item of the table is written, the items of other models sharing it too.
    The summary's ``tableArn`` and ``tableId`` are the table's, from ``DescribeTable`` (``tableId`` is ``null``
    where the server gives no ``TableId``, as moto does).

    :param model: a PynamoDB model class: its table is exported.
    :param directory: where to write the export (the ``<prefix>`` of ``<prefix>/AWSDynamoDB/<ExportId>``).
    :param files: how many data files (``data/<random>.json.gz``) to deal the items over.
    :param export_id: the export's id (the name of its folder); by default one like DynamoDB's,
      ``<14-digit milliseconds>-<8 hex digits>``.
    :returns: the export's folder, ``<directory>/AWSDynamoDB/<ExportId>``: what an export's location is.
    :raises InvalidArgumentError: ``model`` is not a PynamoDB model class, ``files`` is not an ``int`` of at least
      1, ``export_id`` is not a plain name, or the export's folder exists already; nothing is written.
    """
    if not (isinstance(model, type) and issubclass(model, Model)):
        raise InvalidArgumentError(f"export_table() takes a PynamoDB model class (its table is exported), not "
                                   f"{model!r}")
    connection = model._get_connection()
    table: Dict[str, Any] = connection.describe_table()
    return write_export(directory, _scan(connection), table_arn=table["TableArn"], table_id=table.get("TableId"),
                        files=files, export_id=export_id)


def write_export(directory: Union[str, os.PathLike[str]], items: Iterable[Dict[str, Any]], *, table_arn: str,
                 table_id: Optional[str] = None, files: int = 4, export_id: Optional[str] = None) -> str:
    """Write ``items`` (raw, as DynamoDB returns them: ``{"pk": {"S": "..."}, ...}``; binaries as ``bytes`` or
    base64 text) as DynamoDB exports a table to S3::

        <directory>/AWSDynamoDB/<ExportId>/_started                 empty
        <directory>/AWSDynamoDB/<ExportId>/manifest-summary.json    the table's ARN, itemCount, outputFormat...
        <directory>/AWSDynamoDB/<ExportId>/manifest-summary.md5     base64 of the MD5 of the manifest
        <directory>/AWSDynamoDB/<ExportId>/manifest-files.json      a JSON line per data file
        <directory>/AWSDynamoDB/<ExportId>/manifest-files.md5
        <directory>/AWSDynamoDB/<ExportId>/data/<random>.json.gz    a line {"Item": {...}} per item

    a full export (``FULL_EXPORT``) in DynamoDB JSON, binaries in base64. The items are dealt over the data files
    in turn, as they come: the items of one partition key land in several files (as in an export of a partition
    that DynamoDB split), and a file with no items is an empty gzip file (as DynamoDB writes for an empty
    partition). The ``dataFileS3Key`` of each file, and ``manifestFilesS3Key``, start at
    ``AWSDynamoDB/<ExportId>/`` as DynamoDB writes them for an export with no S3 prefix; ``s3Bucket`` and
    ``s3Prefix`` are ``null``. Items are streamed: memory does not grow with their number.

    :param table_arn: the table's ARN, ``arn:aws:dynamodb:<region>:<account>:table/<name>``: an audit from the
      export is of the table of that name, account and region.
    :param table_id: the table's id (``TableId``, from ``DescribeTable``); by default ``null`` (DynamoDB always
      writes the id), and an audit matches the export to its live table by ``table_arn`` alone.
    :returns: the export's folder, ``<directory>/AWSDynamoDB/<ExportId>``.
    :raises InvalidArgumentError: as :func:`export_table`, or ``table_arn`` is not a table's ARN, or ``table_id``
      is not a non-empty string; nothing is written.
    """
    if type(files) is not int or files < 1:
        raise InvalidArgumentError(f"files={files!r}: give an int of at least 1, how many data files to deal the "
                                   f"items over")
    if export_id is None:
        export_id = f"{int(time.time() * 1000):014d}-{secrets.token_hex(4)}"
    if not isinstance(export_id, str) or not _EXPORT_ID.fullmatch(export_id):
        raise InvalidArgumentError(f"export_id={export_id!r}: give a plain folder name (letters, digits, '.', '_', "
                                   f"'-'), like DynamoDB's 01701234567890-a1b2c3d4")
    if table_of(table_arn) is None:
        raise InvalidArgumentError(f"table_arn={table_arn!r}: give a table's ARN, "
                                   f"arn:aws:dynamodb:<region>:<account>:table/<name>")
    if table_id is not None and not (isinstance(table_id, str) and table_id):
        raise InvalidArgumentError(f"table_id={table_id!r}: give the table's TableId (a string), or None")
    root = os.path.join(os.fspath(directory), ROOT, export_id)
    if os.path.lexists(root):
        raise InvalidArgumentError(f"{root} already holds an export: give another export_id, or another directory")
    started = _now()
    os.makedirs(os.path.join(root, "data"))
    open(os.path.join(root, "_started"), "wb").close()
    keys = [f"{ROOT}/{export_id}/data/{_random_name()}.json.gz" for _ in range(files)]
    paths = [os.path.join(root, *key.split("/")[2:]) for key in keys]
    counts, billed = _write_items(paths, items)
    entries: List[Dict[str, Any]] = []
    for key, path, count in zip(keys, paths, counts):
        digest = _md5(path)
        entries.append({"itemCount": count, "md5Checksum": base64.b64encode(digest).decode("ascii"),
                        "etag": digest.hex(), "dataFileS3Key": key})
    _write_manifest(root, FILES_MANIFEST, "".join(json.dumps(entry) + "\n" for entry in entries))
    summary = {"version": "2020-06-30", "exportArn": f"{table_arn}/export/{export_id}", "startTime": started,
               "endTime": _now(), "tableArn": table_arn, "tableId": table_id,
               "exportTime": started, "s3Bucket": None, "s3Prefix": None, "s3SseAlgorithm": "AES256",
               "s3SseKmsKeyId": None, "manifestFilesS3Key": f"{ROOT}/{export_id}/{FILES_MANIFEST}",
               "billedSizeBytes": billed, "itemCount": sum(counts), "outputFormat": "DYNAMODB_JSON",
               "exportType": "FULL_EXPORT"}
    _write_manifest(root, SUMMARY, json.dumps(summary))
    return root


def _scan(connection: Any) -> Iterator[Dict[str, Any]]:
    """Every item of the connection's table, raw, by a strongly consistent Scan."""
    start: Optional[Dict[str, Any]] = None
    while True:
        page = connection.scan(exclusive_start_key=start, consistent_read=True)
        yield from page.get("Items", [])
        start = page.get("LastEvaluatedKey")
        if not start:
            return


def _write_items(paths: List[str], items: Iterable[Dict[str, Any]]) -> Tuple[List[int], int]:
    """Deal ``items`` over the gzip files ``paths`` in turn; each file's count, and the items' size (what DynamoDB
    bills an export by)."""
    counts = [0] * len(paths)
    pending: List[List[bytes]] = [[] for _ in paths]
    billed = 0
    with ExitStack() as stack:
        outputs = [stack.enter_context(gzip.open(path, "wb", compresslevel=6)) for path in paths]
        for number, item in enumerate(items):
            index = number % len(paths)
            billed += item_bytes(item)
            lines = pending[index]
            lines.append(_ENCODE({"Item": _exported(item)}).encode("utf-8"))
            if len(lines) == _BATCH:
                outputs[index].write(b"\n".join(lines) + b"\n")
                counts[index] += len(lines)
                lines.clear()
        for output, lines, index in zip(outputs, pending, range(len(paths))):
            if lines:
                output.write(b"\n".join(lines) + b"\n")
                counts[index] += len(lines)
    return counts, billed


def _exported(item: Dict[str, Any]) -> Dict[str, Any]:
    """An item as DynamoDB JSON holds it: binaries in base64 (PynamoDB 6 reads them as bytes, 5 as base64)."""
    return {name: _value(value) for name, value in item.items()}


def _value(value: Dict[str, Any]) -> Dict[str, Any]:
    kind, raw = next(iter(value.items()))
    if kind == "B":
        return {"B": _base64(raw)}
    if kind == "BS":
        return {"BS": [_base64(element) for element in raw]}
    if kind == "M":
        return {"M": _exported(raw)}
    if kind == "L":
        return {"L": [_value(element) for element in raw]}
    return value


def _base64(raw: Any) -> str:
    return base64.b64encode(raw).decode("ascii") if isinstance(raw, (bytes, bytearray)) else str(raw)


def _write_manifest(root: str, name: str, text: str) -> None:
    """A manifest, and beside it its ``.md5`` (base64 of the MD5 of its bytes), as DynamoDB writes them."""
    data = text.encode("utf-8")
    with open(os.path.join(root, name), "wb") as output:
        output.write(data)
    with open(os.path.join(root, name.replace(".json", ".md5")), "w") as output:
        output.write(base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii"))


def _md5(path: str) -> bytes:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.digest()


def _random_name() -> str:
    """A name like DynamoDB's for a data file: 26 random base32 characters, in lower case."""
    return base64.b32encode(secrets.token_bytes(16)).decode("ascii").rstrip("=").lower()


def _now() -> str:
    """The time now as DynamoDB writes it in a manifest: ``2020-11-04T07:28:34.028Z``."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
