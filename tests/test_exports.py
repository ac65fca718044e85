"""Issue 21: reading DynamoDB table exports as AWS writes them (``pynamodb_counters.reconcile.export._files``), from a
local copy or from S3, and writing them for tests (:func:`pynamodb_counters.testing.export_table`).

moto writes no manifests (see DYNAMODB_FACTS.md, "Exports"), so every export here is written by ``export_table``
from a moto table, or by ``write_export`` from items, then read back; each bad input is planted in such an export.
"""
from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import multiprocessing
import os
import pickle
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List

import boto3
import pytest
from botocore.exceptions import ClientError

from pynamodb_counters.exceptions import CounterError, ExportError, InvalidArgumentError
from pynamodb_counters.reconcile.export import _files, _sources
from pynamodb_counters.reconcile.export._files import DataFile, Export, open_export
from pynamodb_counters.testing import export_table, write_export
from tests.support.factories import like, post, raw_client, stored
from tests.support.models import Bookmark, Comment, Edit, Post, User

#: the suite's moto in-process (S3 too), with its tables: for the tests that export a table or read from S3
moto = pytest.mark.usefixtures("dynamodb")

#: an item of every DynamoDB type, written behind the library, as boto3 sends it
TYPED = {"pk": {"S": "TYPED#1"}, "sk": {"S": "ALL"}, "b": {"B": b"\x00\xffbin"}, "bs": {"BS": [b"\x01", b"\x02"]},
         "n": {"N": "-12.5"}, "ns": {"NS": ["1", "2"]}, "ss": {"SS": ["a", "b"]}, "yes": {"BOOL": True},
         "none": {"NULL": True}, "l": {"L": [{"S": "x"}, {"N": "3"}, {"B": b"\x03"}]},
         "m": {"M": {"inner": {"M": {"deep": {"B": b"\x04"}}}, "s": {"S": "é✓"}}}}
#: the same item as an export holds it: DynamoDB JSON, binaries in base64
EXPORTED_TYPED = {"pk": {"S": "TYPED#1"}, "sk": {"S": "ALL"}, "b": {"B": "AP9iaW4="}, "bs": {"BS": ["AQ==", "Ag=="]},
                  "n": {"N": "-12.5"}, "ns": {"NS": ["1", "2"]}, "ss": {"SS": ["a", "b"]}, "yes": {"BOOL": True},
                  "none": {"NULL": True}, "l": {"L": [{"S": "x"}, {"N": "3"}, {"B": "Aw=="}]},
                  "m": {"M": {"inner": {"M": {"deep": {"B": "BA=="}}}, "s": {"S": "é✓"}}}}

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/Social"

#: a few posts and likes, as a table would hold them
ITEMS = [{"pk": {"S": f"POST#{number % 3}"}, "sk": {"S": f"LIKE#USER#{number}"}, "likedAt": {"N": "1"}}
         for number in range(8)] + [{"pk": {"S": f"POST#{number}"}, "sk": {"S": "META"}, "like_tally": {"N": "2"}}
                                    for number in range(3)]



@contextlib.contextmanager
def table_id(model: Any, value: str) -> Iterator[None]:
    """DescribeTable answers for ``model``'s table with ``TableId`` ``value``, as AWS's does (moto 5.2.5 gives
    none): PynamoDB's own ``describe_table`` of the model's connection (PynamoDB 5 parses its responses itself,
    past botocore's events)."""
    connection = model._get_connection().connection
    described = connection.describe_table

    def answer(table_name: str) -> Dict[str, Any]:
        return dict(described(table_name), TableId=value)

    connection.describe_table = answer
    try:
        yield
    finally:
        del connection.describe_table  # PynamoDB's own method again


def social() -> None:
    """Posts with likes, a bookmark, a comment (a child that is also a parent) and an item of every type."""
    for number in range(4):
        post(f"POST#{number}")
        for user in range(number + 3):
            like(user, f"POST#{number}").save()
    User(user_id="U1").save()
    Bookmark(pk="POST#0", sk="BOOKMARK#USER#U1", user_id="U1").save()
    Comment(pk="POST#1", sk="COMMENT#c1", text="hi").save()
    raw_client(Post.Meta.host).put_item(TableName="Social", Item=TYPED)


def as_exported(item: Dict[str, Any]) -> Dict[str, Any]:
    """A stored item as the export holds it (only the typed item has binaries)."""
    return EXPORTED_TYPED if item["pk"] == TYPED["pk"] else item


def every_item(export: Export) -> List[Dict[str, Any]]:
    return [item for file in export.files for item in export.read(file)]


def unordered_sets(value: Any) -> Any:
    """A typed value with its sets sorted: DynamoDB's sets have no order, and a set of binaries comes back in the order
    of Python's randomised bytes hash, so two reads of one item may list a set differently."""
    if isinstance(value, dict):
        return {key: sorted(inner) if key in ("SS", "NS", "BS") else unordered_sets(inner)
                for key, inner in value.items()}
    if isinstance(value, list):
        return [unordered_sets(inner) for inner in value]
    return value


def by_repr(items: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return sorted((unordered_sets(item) for item in items), key=repr)


# -- round trips -------------------------------------------------------------------------------------------------
@moto
def test_an_exported_table_reads_back_every_item_exactly_over_several_files(tmp_path: Path) -> None:
    social()
    with table_id(Post, "6f0d5b43-social"):
        root = export_table(Post, tmp_path, files=4)
    export = open_export(root)
    live = [as_exported(item) for item in stored("Social")]
    assert export.location == root and export.table == "Social" and export.item_count == len(live) == 25
    assert (export.table_arn, export.table_id) == (TABLE_ARN, "6f0d5b43-social")
    assert len(export.files) == 4 and sum(file.items for file in export.files) == len(live)
    assert len([file for file in export.files if file.items]) == 4  # dealt over every file
    assert by_repr(every_item(export)) == by_repr(live)


@moto
def test_a_table_with_a_number_range_key_round_trips(tmp_path: Path) -> None:
    for seq in (1, 2, 10):
        raw_client(Post.Meta.host).put_item(TableName="Edits", Item={"doc_id": {"S": "D1"}, "seq": {"N": str(seq)},
                                                                      "version": {"N": "1"}})
    export = open_export(export_table(Edit, str(tmp_path), files=2))
    assert export.table == "Edits"
    assert by_repr(every_item(export)) == by_repr(stored("Edits"))


@moto
def test_the_export_is_written_in_the_layout_aws_writes(tmp_path: Path) -> None:
    social()
    root = Path(export_table(Post, tmp_path, files=3, export_id="01701234567890-a1b2c3d4"))
    assert root == tmp_path / "AWSDynamoDB" / "01701234567890-a1b2c3d4"
    assert sorted(path.name for path in root.iterdir()) == ["_started", "data", "manifest-files.json",
                                                             "manifest-files.md5", "manifest-summary.json",
                                                             "manifest-summary.md5"]
    assert (root / "_started").read_bytes() == b""
    for manifest in ("manifest-files", "manifest-summary"):  # base64 of the MD5 of the manifest, as AWS writes
        digest = base64.b64encode(hashlib.md5((root / f"{manifest}.json").read_bytes()).digest()).decode()
        assert (root / f"{manifest}.md5").read_text() == digest
    summary = json.loads((root / "manifest-summary.json").read_text())
    assert list(summary) == ["version", "exportArn", "startTime", "endTime", "tableArn", "tableId", "exportTime",
                             "s3Bucket", "s3Prefix", "s3SseAlgorithm", "s3SseKmsKeyId", "manifestFilesS3Key",
                             "billedSizeBytes", "itemCount", "outputFormat", "exportType"]
    assert summary["version"] == "2020-06-30" and summary["tableArn"] == TABLE_ARN
    assert summary["exportArn"] == f"{TABLE_ARN}/export/01701234567890-a1b2c3d4"
    assert summary["manifestFilesS3Key"] == "AWSDynamoDB/01701234567890-a1b2c3d4/manifest-files.json"
    assert summary["outputFormat"] == "DYNAMODB_JSON" and summary["exportType"] == "FULL_EXPORT"
    assert summary["itemCount"] == len(stored("Social")) == 25 and summary["billedSizeBytes"] > 0
    assert summary["s3Bucket"] is None and summary["s3Prefix"] is None
    assert summary["startTime"] <= summary["endTime"] and summary["exportTime"].endswith("Z")
    entries = [json.loads(line) for line in (root / "manifest-files.json").read_text().splitlines()]
    assert len(entries) == 3 and sum(entry["itemCount"] for entry in entries) == 25
    for entry in entries:
        assert list(entry) == ["itemCount", "md5Checksum", "etag", "dataFileS3Key"]
        assert entry["dataFileS3Key"].startswith("AWSDynamoDB/01701234567890-a1b2c3d4/data/")
        assert entry["dataFileS3Key"].endswith(".json.gz")
        data = (root / entry["dataFileS3Key"].split("/", 2)[2]).read_bytes()
        assert entry["md5Checksum"] == base64.b64encode(hashlib.md5(data).digest()).decode()
        assert entry["etag"] == hashlib.md5(data).hexdigest()
        lines = gzip.decompress(data).decode().splitlines()
        assert len(lines) == entry["itemCount"]
        assert all(list(json.loads(line)) == ["Item"] for line in lines)


def test_write_export_writes_the_table_id_it_is_given_and_null_unless_given(tmp_path: Path) -> None:
    """An export written from items has no table to take a TableId from: without one, it is matched to the live
    table by its ARN alone (docs/auditing-at-scale.rst)."""
    given = open_export(write_export(tmp_path / "given", ITEMS, table_arn=TABLE_ARN, table_id="0b1c-id"))
    assert (given.table_arn, given.table_id) == (TABLE_ARN, "0b1c-id")
    root = Path(write_export(tmp_path / "none", ITEMS, table_arn=TABLE_ARN))
    assert json.loads(summary_path(root).read_text())["tableId"] is None
    assert open_export(str(root)).table_id is None
    with pytest.raises(InvalidArgumentError, match="table_id"):
        write_export(tmp_path / "bad", ITEMS, table_arn=TABLE_ARN, table_id="")
    assert not (tmp_path / "bad").exists()


@moto
def test_an_empty_table_exports_empty_files_that_read_as_no_items(tmp_path: Path) -> None:
    export = open_export(export_table(User, tmp_path, files=2))
    assert export.table == "Users" and export.item_count == 0
    assert [file.items for file in export.files] == [0, 0]
    assert every_item(export) == []


def test_a_data_file_of_zero_bytes_reads_as_an_empty_file(tmp_path: Path) -> None:
    root = Path(write_export(tmp_path, [], table_arn=TABLE_ARN, files=1))
    path = data_path(root, 0)
    path.write_bytes(b"")
    set_entry(root, 0, md5Checksum=base64.b64encode(hashlib.md5(b"").digest()).decode())
    export = open_export(str(root))
    assert every_item(export) == []


@moto
def test_export_table_refuses_what_it_cannot_write_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="files"):
        export_table(Post, tmp_path, files=0)
    with pytest.raises(InvalidArgumentError, match="export_id"):
        export_table(Post, tmp_path, export_id="../elsewhere")
    with pytest.raises(InvalidArgumentError, match="PynamoDB model"):
        export_table("Social", tmp_path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    first = export_table(Post, tmp_path, export_id="01701234567890-a1b2c3d4")
    before = sorted((path, path.read_bytes()) for path in Path(first).rglob("*") if path.is_file())
    with pytest.raises(InvalidArgumentError, match="already holds"):
        export_table(Post, tmp_path, export_id="01701234567890-a1b2c3d4")
    assert sorted((path, path.read_bytes()) for path in Path(first).rglob("*") if path.is_file()) == before


# -- S3 ----------------------------------------------------------------------------------------------------------
def upload(root: str, bucket: str = "exports-bucket", prefix: str = "exports/") -> str:
    """Copy a local export to a moto bucket under ``prefix``, as AWS lays it out; return its ``s3://`` location."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    base = Path(root)
    for path in base.rglob("*"):
        if path.is_file():
            key = f"{prefix}AWSDynamoDB/{base.name}/{path.relative_to(base).as_posix()}"
            s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}AWSDynamoDB/{base.name}/"


@pytest.fixture
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """No S3 client kept from another test (each is made once a process, from the environment of that moment)."""
    monkeypatch.setattr(_sources, "_CLIENTS", {})


@moto
@pytest.mark.parametrize("prefix", ["exports/", ""])
def test_an_export_in_s3_reads_like_its_local_copy(tmp_path: Path, prefix: str) -> None:
    social()
    root = export_table(Post, tmp_path, files=3)
    location = upload(root, prefix=prefix)
    export = open_export(location)
    local = open_export(root)
    assert export.location == location and (export.table, export.item_count) == (local.table, local.item_count)
    assert export.files == local.files
    assert by_repr(every_item(export)) == by_repr(every_item(local))


@moto
@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"])
def test_the_s3_client_follows_botocores_own_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          fresh_clients: None, variable: str) -> None:
    location = upload(export_table(Post, tmp_path, files=1))
    endpoint = "http://exports.s3.test:9000"
    monkeypatch.setenv(variable, endpoint)
    monkeypatch.setenv("MOTO_S3_CUSTOM_ENDPOINTS", endpoint)  # moto answers that endpoint in-process
    export = open_export(location)
    assert export.table == "Social"
    assert _sources._CLIENTS[os.getpid()].meta.endpoint_url == endpoint


@moto
def test_the_s3_client_takes_the_profile_botocore_chooses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          fresh_clients: None) -> None:
    location = upload(export_table(Post, tmp_path, files=1))
    config = tmp_path / "config"
    config.write_text("[profile exports]\nregion = eu-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "exports")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert open_export(location).table == "Social"
    assert _sources._CLIENTS[os.getpid()].meta.region_name == "eu-west-2"


@moto
def test_an_s3_export_that_cannot_be_listed_is_checked_file_by_file_as_it_is_read(
        tmp_path: Path, fresh_clients: None) -> None:
    """Reading an export needs only s3:GetObject: where listing is denied, a missing file is found when read."""
    social()
    root = export_table(Post, tmp_path, files=2)
    location = upload(root)
    gone = open_export(root).files[1]
    boto3.client("s3", region_name="us-east-1").delete_object(Bucket="exports-bucket", Key=f"exports/{gone.key}")

    def denied(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "ListObjectsV2")

    _sources._s3_client().meta.events.register("before-call.s3.ListObjectsV2", denied)
    export = open_export(location)
    assert len(list(export.read(export.files[0]))) == export.files[0].items
    with pytest.raises(ExportError, match=f"s3://exports-bucket/exports/{gone.key} is listed in .*but missing"):
        list(export.read(gone))


@moto
def test_an_s3_location_without_an_export_is_refused_naming_it(fresh_clients: None) -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="exports-bucket")
    with pytest.raises(ExportError, match="s3://exports-bucket/nothing/manifest-summary.json"):
        open_export("s3://exports-bucket/nothing/")
    with pytest.raises(ExportError, match="s3://no-such-bucket/x/manifest-summary.json"):
        open_export("s3://no-such-bucket/x")
    with pytest.raises(ExportError, match="bucket"):
        open_export("s3:///AWSDynamoDB/x")


@moto
def test_a_missing_data_file_in_s3_is_refused_before_any_is_read(tmp_path: Path, fresh_clients: None) -> None:
    social()
    root = export_table(Post, tmp_path, files=2)
    location = upload(root)
    gone = open_export(root).files[0]
    boto3.client("s3", region_name="us-east-1").delete_object(Bucket="exports-bucket", Key=f"exports/{gone.key}")
    with pytest.raises(ExportError, match=f"s3://exports-bucket/exports/{gone.key} is listed in .*but missing"):
        open_export(location)


# -- pickling ----------------------------------------------------------------------------------------------------
def count_items(export: Export, file: DataFile) -> int:
    """In a worker process: the file's items, read there."""
    return sum(1 for _ in export.read(file))


def test_an_export_and_its_files_pickle_and_read_in_another_process(tmp_path: Path) -> None:
    export = open_export(write_export(tmp_path, ITEMS, table_arn=TABLE_ARN, files=2))
    assert pickle.loads(pickle.dumps(export)) == export
    assert pickle.loads(pickle.dumps(export.files[0])) == export.files[0]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        counts = list(pool.map(count_items, [export] * len(export.files), export.files))
    assert counts == [file.items for file in export.files]


@moto
def test_an_s3_export_pickles_without_a_client_and_its_process_makes_one_for_every_read(
        tmp_path: Path, fresh_clients: None) -> None:
    location = upload(write_export(tmp_path, ITEMS, table_arn=TABLE_ARN, files=2))
    export = open_export(location)
    assert b"botocore" not in pickle.dumps(export) and pickle.loads(pickle.dumps(export)) == export
    client = _sources._CLIENTS[os.getpid()]
    assert sum(len(list(export.read(file))) for file in export.files) == len(ITEMS)
    open_export(location)
    assert _sources._CLIENTS == {os.getpid(): client}  # made once, for this process


# -- bad input ---------------------------------------------------------------------------------------------------
def summary_path(root: Path) -> Path:
    return root / "manifest-summary.json"


def set_summary(root: Path, **changes: Any) -> None:
    summary = json.loads(summary_path(root).read_text())
    summary.update(changes)
    summary_path(root).write_text(json.dumps(summary))


def entries(root: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in (root / "manifest-files.json").read_text().splitlines()]


def set_entry(root: Path, index: int, **changes: Any) -> None:
    listed = entries(root)
    listed[index].update(changes)
    (root / "manifest-files.json").write_text("".join(json.dumps(entry) + "\n" for entry in listed))


def data_path(root: Path, index: int) -> Path:
    return root / entries(root)[index]["dataFileS3Key"].split("/", 2)[2]


def plant(root: Path, lines: List[bytes], index: int = 0) -> Path:
    """Replace a data file with these lines, its manifest entry and the summary made to agree: only the lines are
    wrong."""
    path = data_path(root, index)
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), compresslevel=1))
    digest = hashlib.md5(path.read_bytes()).digest()
    before = entries(root)[index]["itemCount"]
    set_entry(root, index, itemCount=len(lines), md5Checksum=base64.b64encode(digest).decode(), etag=digest.hex())
    set_summary(root, itemCount=json.loads(summary_path(root).read_text())["itemCount"] - before + len(lines))
    return path


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """A local export in two files, each holding items."""
    return Path(write_export(tmp_path / "copy", ITEMS, table_arn=TABLE_ARN, files=2))


def remove_data(root: Path) -> None:
    """Delete every data file: an error raised before any is looked at is raised still."""
    for index in range(len(entries(root))):
        data_path(root, index).unlink()


def test_export_error_is_a_counter_error() -> None:
    assert issubclass(ExportError, CounterError)


def test_a_location_without_an_export_is_refused_naming_the_manifest_it_looked_for(exported: Path) -> None:
    above = exported.parent.parent  # the directory holding AWSDynamoDB/
    with pytest.raises(ExportError, match="manifest-summary.json") as error:
        open_export(str(above))
    assert str(above / "manifest-summary.json") in str(error.value)
    assert str(exported) in str(error.value)  # the export found below is named
    with pytest.raises(ExportError, match=str(above / "missing" / "manifest-summary.json")):
        open_export(str(above / "missing"))


def test_an_ion_export_is_refused_naming_the_format_to_ask_for(exported: Path) -> None:
    set_summary(exported, outputFormat="ION")
    remove_data(exported)
    with pytest.raises(ExportError, match="ION") as error:
        open_export(str(exported))
    assert "--export-format DYNAMODB_JSON" in str(error.value) and "manifest-summary.json" in str(error.value)


def test_an_incremental_export_is_refused_asking_for_a_full_one(exported: Path) -> None:
    set_summary(exported, exportType="INCREMENTAL_EXPORT")
    remove_data(exported)
    with pytest.raises(ExportError, match="incremental.*full export") as error:
        open_export(str(exported))
    assert "manifest-summary.json" in str(error.value)


def test_lines_of_an_incremental_export_are_refused_asking_for_a_full_one(exported: Path) -> None:
    line = {"Metadata": {"WriteTimestampMicros": {"N": "1"}}, "Keys": {"pk": {"S": "P"}, "sk": {"S": "META"}},
            "NewImage": {"pk": {"S": "P"}, "sk": {"S": "META"}}}
    path = plant(exported, [json.dumps(line).encode()])
    export = open_export(str(exported))
    with pytest.raises(ExportError, match="incremental.*full export") as error:
        list(export.read(export.files[0]))
    assert str(path) in str(error.value)


def test_a_data_file_listed_but_missing_is_refused_naming_it(exported: Path) -> None:
    path = data_path(exported, 1)
    path.unlink()
    with pytest.raises(ExportError, match="is listed in .*manifest-files.json but missing") as error:
        open_export(str(exported))
    assert str(path) in str(error.value)


@pytest.mark.parametrize("damage", ["truncated", "header", "crc"])
def test_a_truncated_or_corrupt_gzip_is_refused_naming_the_file(exported: Path, damage: str) -> None:
    path = data_path(exported, 0)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "header":
        data[0] ^= 0xFF
    else:
        data[-8] ^= 0xFF  # the CRC32 of the gzip trailer
    path.write_bytes(bytes(data))
    export = open_export(str(exported))
    items = export.read(export.files[0])
    with pytest.raises(ExportError, match="gzip") as error:
        list(items)
    assert str(path) in str(error.value)
    assert list(items) == []  # nothing more is read


def test_an_md5_that_differs_from_the_manifest_is_refused_naming_the_file(exported: Path) -> None:
    set_entry(exported, 1, md5Checksum=base64.b64encode(hashlib.md5(b"other").digest()).decode())
    export = open_export(str(exported))
    assert len(list(export.read(export.files[0]))) == export.files[0].items
    with pytest.raises(ExportError, match="MD5") as error:
        list(export.read(export.files[1]))
    assert str(data_path(exported, 1)) in str(error.value)


def test_a_file_whose_item_count_differs_from_its_manifest_entry_is_refused(exported: Path) -> None:
    listed = entries(exported)[0]["itemCount"]
    set_entry(exported, 0, itemCount=listed + 1)
    set_summary(exported, itemCount=json.loads(summary_path(exported).read_text())["itemCount"] + 1)
    export = open_export(str(exported))
    with pytest.raises(ExportError, match=f"holds {listed} items.*says {listed + 1}") as error:
        list(export.read(export.files[0]))
    assert str(data_path(exported, 0)) in str(error.value)


def test_files_whose_counts_do_not_add_up_to_the_summary_are_refused(exported: Path) -> None:
    set_summary(exported, itemCount=1000)
    remove_data(exported)
    with pytest.raises(ExportError, match="1000") as error:
        open_export(str(exported))
    assert "manifest-files.json" in str(error.value) and "manifest-summary.json" in str(error.value)


@pytest.mark.parametrize("bad", [b'{"Items": {"pk": {"S": "x"}}}', b'{"Item": "x"}', b"[1, 2]", b"not json", b"",
                                 b'{"Item": {"pk": {"S": "x"}}, "Extra": 1}', b'{"Item": {"pk": {"S": "\xff"}}}'])
def test_a_line_that_is_not_an_item_is_refused_naming_the_file_and_line(exported: Path, bad: bytes) -> None:
    good = b'{"Item": {"pk": {"S": "POST#0"}, "sk": {"S": "META"}}}'
    path = plant(exported, [good, bad, good])
    export = open_export(str(exported))
    items = export.read(export.files[0])
    assert next(items) == {"pk": {"S": "POST#0"}, "sk": {"S": "META"}}
    with pytest.raises(ExportError, match="line 2") as error:
        next(items)
    assert str(path) in str(error.value) and '{"Item": {...}}' in str(error.value)
    assert list(items) == []  # nothing more is read


def test_a_line_longer_than_any_item_is_refused_before_it_is_held_whole(exported: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files, "_LONGEST_LINE", 200_000)
    path = plant(exported, [b'{"Item": {"pk": {"S": "POST#0"}}}', b"x" * 300_000])
    export = open_export(str(exported))
    items = export.read(export.files[0])
    assert next(items) == {"pk": {"S": "POST#0"}}
    with pytest.raises(ExportError, match="line 2: over 200000 bytes long") as error:
        next(items)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("change", [{"tableArn": "Social"}, {"tableArn": None}, {"itemCount": "27"},
                                    {"outputFormat": None}, {"exportType": "SNAPSHOT"}, {"tableId": 7},
                                    {"tableId": ""}])
def test_a_summary_that_is_not_as_aws_writes_it_is_refused(exported: Path, change: Dict[str, Any]) -> None:
    set_summary(exported, **change)
    with pytest.raises(ExportError, match="manifest-summary.json"):
        open_export(str(exported))


def test_manifests_that_are_not_json_or_are_missing_are_refused_naming_them(exported: Path) -> None:
    files = exported / "manifest-files.json"
    listed = files.read_text()
    files.write_text(listed + "{not json\n")
    with pytest.raises(ExportError, match=f"{files}.* line 3"):
        open_export(str(exported))
    files.write_text(listed.replace('"itemCount"', '"count"', 1))
    with pytest.raises(ExportError, match=f"{files}.* line 1"):
        open_export(str(exported))
    files.unlink()
    with pytest.raises(ExportError, match=str(files)):
        open_export(str(exported))
    summary_path(exported).write_text("{")
    with pytest.raises(ExportError, match=str(summary_path(exported))):
        open_export(str(exported))


def test_a_manifest_listing_a_data_file_twice_is_refused_naming_the_file_and_both_lines(exported: Path) -> None:
    """Its items would be counted twice: the counts and MD5s of a manifest repeating an entry all add up."""
    listed = entries(exported)
    (exported / "manifest-files.json").write_text("".join(json.dumps(entry) + "\n" for entry in listed + listed[:1]))
    total = json.loads(summary_path(exported).read_text())["itemCount"]
    set_summary(exported, itemCount=total + listed[0]["itemCount"])
    with pytest.raises(ExportError, match=r"manifest-files.json, line 3: .* listed twice \(line 1 too\)") as error:
        open_export(str(exported))
    assert listed[0]["dataFileS3Key"] in str(error.value)


def test_a_data_file_key_outside_the_export_is_refused(exported: Path) -> None:
    set_entry(exported, 0, dataFileS3Key="AWSDynamoDB/01701234567890-a1b2c3d4/data/../../../secret.json.gz")
    with pytest.raises(ExportError, match="dataFileS3Key"):
        open_export(str(exported))


# -- memory ------------------------------------------------------------------------------------------------------
def test_reading_a_file_streams_it_and_never_holds_it_whole(tmp_path: Path) -> None:
    root = Path(write_export(tmp_path, [], table_arn=TABLE_ARN, files=1))
    lines = [b'{"Item":{"pk":{"S":"POST#%d"},"sk":{"S":"LIKE#USER#%d"},"likedAt":{"N":"1"}}}' % (n % 10, n)
             for n in range(200_000)]
    plant(root, lines)
    decompressed = sum(len(line) + 1 for line in lines)
    del lines
    export = open_export(str(root))
    file = export.files[0]
    tracemalloc.start()
    try:
        count = sum(1 for _ in export.read(file))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == file.items == 200_000
    assert peak < decompressed / 20, (peak, decompressed)
