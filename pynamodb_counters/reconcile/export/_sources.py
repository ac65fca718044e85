"""
Where a DynamoDB table export's files are: a local directory, or S3 (``s3://``, and Hadoop's ``s3a://`` and
``s3n://``). :func:`source_of` gives the :class:`Source` of a location; the export's files are named in it by their
path inside the export (``manifest-summary.json``, ``data/<random>.json.gz``), what they are is read elsewhere
(``_files``).

A file that does not exist is a :class:`Missing`, for the reader to say which file of the export it is; any other
refusal of S3 is an :class:`~pynamodb_counters.exceptions.ExportError` naming the object.

The S3 client is made once in each process that reads, through botocore's own configuration chain (profiles,
region, ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``), and kept on nothing that travels to other processes (an
export goes to process pools and Spark executors): each process makes its own.
"""
from __future__ import annotations

import glob
import os
import re
import threading
from typing import Any, BinaryIO, Dict, List, Sequence, Set, cast

import botocore.session
from botocore.exceptions import BotoCoreError, ClientError

from ...exceptions import ExportError

__all__ = ["ROOT", "SUMMARY", "Missing", "Source", "source_of"]

ROOT = "AWSDynamoDB"
"""The folder DynamoDB writes every export under, one ``<ExportId>`` folder each."""
SUMMARY = "manifest-summary.json"
"""The manifest DynamoDB writes in an export's own folder: where it is, there is an export."""

_S3_SCHEME = re.compile(r"^s3[an]?://", re.IGNORECASE)  # s3:// and Hadoop's s3a://, s3n:// (what Spark users write)


class Missing(Exception):
    """The object does not exist (the message says how the store put it, where it says more)."""

    @property
    def said(self) -> str:
        """What the store said, to append to a message: ``" (NoSuchKey: ...)"``, or nothing."""
        return f" ({self})" if str(self) else ""


class Source:
    """Where an export's files are, each named by its path inside the export (``data/<random>.json.gz``)."""

    def name(self, relative: str) -> str:
        """The file's full name, for messages."""
        raise NotImplementedError

    def open(self, relative: str) -> BinaryIO:
        """The file as a binary stream. :raises Missing: it does not exist."""
        raise NotImplementedError

    def missing(self, relatives: Sequence[str]) -> List[str]:
        """Those of ``relatives`` that do not exist (where the store can tell before reading them)."""
        raise NotImplementedError

    def exports_below(self) -> List[str]:
        """Exports found under this location, for the message that it holds none itself."""
        raise NotImplementedError


def source_of(location: str) -> Source:
    """The files at ``location``: an S3 URL, or a local directory.

    :raises ExportError: a URL of another scheme, or an S3 URL naming no bucket.
    """
    if _S3_SCHEME.match(location):
        return _Bucket(location)
    if "://" in location:
        raise ExportError(f"{location}: exports are read from S3 (s3://<bucket>/<prefix>/{ROOT}/<ExportId>/) or "
                          f"from a local directory")
    return _Directory(location)


class _Directory(Source):
    def __init__(self, root: str) -> None:
        self.root = root

    def name(self, relative: str) -> str:
        return os.path.join(self.root, *relative.split("/"))

    def open(self, relative: str) -> BinaryIO:
        try:
            return open(self.name(relative), "rb")
        except (FileNotFoundError, NotADirectoryError):
            raise Missing() from None

    def missing(self, relatives: Sequence[str]) -> List[str]:
        return [relative for relative in relatives if not os.path.isfile(self.name(relative))]

    def exports_below(self) -> List[str]:
        root = glob.escape(self.root)
        found = glob.glob(os.path.join(root, "*", SUMMARY)) + glob.glob(os.path.join(root, ROOT, "*", SUMMARY))
        return sorted(os.path.dirname(path) for path in found)[:5]


class _Bucket(Source):
    def __init__(self, location: str) -> None:
        scheme, _, path = location.partition("://")
        self.scheme = scheme
        self.bucket, _, prefix = path.partition("/")
        if not self.bucket:
            raise ExportError(f"{location} names no bucket: an export in S3 is s3://<bucket>/<prefix>/{ROOT}/"
                              f"<ExportId>/")
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"

    def name(self, relative: str) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}{relative}"

    def open(self, relative: str) -> BinaryIO:
        try:
            body = _s3_client().get_object(Bucket=self.bucket, Key=self.prefix + relative)["Body"]
        except ClientError as error:
            if _code(error) in ("NoSuchKey", "NoSuchBucket", "404"):
                raise Missing(_reason(error)) from None
            raise ExportError(f"{self.name(relative)} cannot be read from S3: {_reason(error)}", cause=error) \
                from error
        return cast(BinaryIO, body)

    def missing(self, relatives: Sequence[str]) -> List[str]:
        folder = os.path.commonprefix(list(relatives)).rpartition("/")[0]
        prefix = self.prefix + (folder + "/" if folder else "")
        keys: Set[str] = set()
        try:
            for page in _s3_client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                keys.update(entry["Key"] for entry in page.get("Contents", []))
        except ClientError as error:
            if _code(error) == "AccessDenied":  # reading needs only s3:GetObject: each file is checked when read
                return []
            raise ExportError(f"{self.name(folder)} cannot be listed: {_reason(error)}", cause=error) from error
        except BotoCoreError as error:
            raise ExportError(f"{self.name(folder)} cannot be listed: {error}", cause=error) from error
        return [relative for relative in relatives if self.prefix + relative not in keys]

    def exports_below(self) -> List[str]:
        try:
            page = _s3_client().list_objects_v2(Bucket=self.bucket, Prefix=f"{self.prefix}{ROOT}/", Delimiter="/",
                                                MaxKeys=5)
        except (ClientError, BotoCoreError):
            return []
        return [f"{self.scheme}://{self.bucket}/{entry['Prefix']}" for entry in page.get("CommonPrefixes", [])]


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _reason(error: ClientError) -> str:
    found = error.response.get("Error", {})
    return f"{found.get('Code', '')}: {found.get('Message', '')}".strip(": ")


#: one S3 client in each process, made when it first reads (never kept on an Export: they travel to other processes)
_CLIENTS: Dict[int, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _s3_client() -> Any:
    """This process's S3 client, made through botocore's own configuration chain (profiles, region,
    ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``). botocore's clients are thread-safe: the process's threads share
    it."""
    pid = os.getpid()
    client = _CLIENTS.get(pid)
    if client is None:
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(pid)
            if client is None:
                client = botocore.session.get_session().create_client("s3")
                _CLIENTS[pid] = client
    return client


def _new_lock() -> None:
    global _CLIENTS_LOCK
    _CLIENTS_LOCK = threading.Lock()  # a forked child never waits on a lock its parent's threads held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock)
