"""The audit from an export as a Spark job (``engine="spark"``, on the run's ``local[2]`` session) gives the local
engine's candidates and drifts, for every kind of relation of the export table; a reading error on an executor
reaches the caller as itself, and nothing is reported."""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any, List

import pytest

from pynamodb_counters import audit
from pynamodb_counters.exceptions import ExportError
from tests.support.export_models import TABLE_MODELS
from tests.test_export_audit import COUNTERS, activity, drifts, export_for, exports, plant

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("dynamodb")]


@pytest.fixture
def counters_models() -> List[type]:
    return list(TABLE_MODELS)


def test_spark_gives_the_local_engines_candidates_and_drifts_for_every_counter(spark: Any, tmp_path: Path) -> None:
    activity()
    plant()
    taken = exports(tmp_path, files=3)
    for counter in COUNTERS:
        local = audit(counter, export=export_for(counter, taken))
        on_spark = audit(counter, export=export_for(counter, taken), engine="spark", spark=spark)
        assert local.drifts, counter  # each counter was made to drift
        assert drifts(on_spark, "candidates") == drifts(local, "candidates")
        assert on_spark == local, counter


def test_a_reading_error_on_an_executor_arrives_as_itself(spark: Any, tmp_path: Path) -> None:
    activity()
    export = Path(exports(tmp_path, files=3)["Forums"])
    broken = sorted((export / "data").glob("*.json.gz"))[0]
    broken.write_bytes(gzip.compress(b'{"Item": {}}\n')[:-4])
    with pytest.raises(ExportError, match=broken.name):
        audit(COUNTERS[0], export=str(export), engine="spark", spark=spark)
