"""The pytest plugin, as a user's suite sees it: two lines of conftest, then fixtures (run with pytester, on the
models of ``tests/support/apps/plugin_models.py``)."""
from __future__ import annotations

from typing import Optional

import pytest

from tests.support.app_package import source

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # each test runs pytest in a subprocess

TESTS = '''
from concurrent.futures import ThreadPoolExecutor

import pytest

from app_models import Like, Post
from pynamodb_counters import skip_counting


def like(user, pk="POST#1"):
    return Like(pk=pk, sk=f"LIKE#USER#{user}", liked_at=1)


def test_counted_writes_on_the_default_backend(counters_backend, counters_signals, assert_counters_exact):
    assert counters_backend.kind == EXPECTED_KIND
    assert Like in counters_backend.models  # found through Post's counter
    Post(pk="POST#1", sk="META").save()
    like("a").save()
    like("b").save()
    like("a").delete()
    assert Post.get("POST#1", "META").like_tally == 1
    assert [s["sender"] for s in counters_signals.child_added] == [Like, Like]
    assert len(counters_signals.child_removed) == 1
    assert_counters_exact(Post)


def test_each_test_gets_fresh_tables(counters_backend):
    assert Post.count() == 0


def test_drift_fails_the_assertion(counters_backend, assert_counters_exact):
    Post(pk="POST#1", sk="META").save()
    with skip_counting():
        like("a").save()
    with pytest.raises(AssertionError, match=r"Post \\['POST#1', 'META'\\] like_tally: stored 0, actual 1"):
        assert_counters_exact(Like)


@pytest.mark.counters_served
def test_threads_on_the_served_engine(counters_backend, assert_counters_exact):
    assert counters_backend.kind == "served"
    assert counters_backend.endpoint_url.startswith("http://127.0.0.1:")
    Post(pk="POST#1", sk="META").save()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: like(n).save(), range(24)))
    assert Post.get("POST#1", "META", consistent_read=True).like_tally == 24
    assert_counters_exact(Post.like_tally)
'''


def make_suite(pytester: pytest.Pytester, expected_kind: str, conftest: Optional[str] = None) -> None:
    """The user's models, their conftest (the plugin's two lines unless ``conftest`` is given) and their tests."""
    pytester.makepyfile(app_models=source("plugin_models"))
    pytester.makeconftest(source("plugin_conftest") if conftest is None else conftest)
    pytester.makepyfile(test_app=TESTS.replace("EXPECTED_KIND", repr(expected_kind)))


def test_two_lines_of_conftest_give_a_moto_backend(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "moto")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_the_served_engine_for_every_test(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "served")
    result = pytester.runpytest_subprocess("--counters-backend=served", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_models_from_the_ini_file(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "moto", conftest="")
    pytester.makeini("[pytest]\ncounters_models = app_models:Post app_models:Like\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_a_failing_count_is_reported_by_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(app_models=source("plugin_models"))
    pytester.makeconftest(source("plugin_conftest"))
    pytester.makepyfile(test_bad='''
from app_models import Like, Post
from pynamodb_counters import skip_counting


def test_drift(counters_backend, assert_counters_exact):
    Post(pk="POST#1", sk="META").save()
    with skip_counting():
        Like(pk="POST#1", sk="LIKE#USER#a", liked_at=1).save()
    assert_counters_exact(Post)
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 counter(s) differ from their children*", "*stored 0, actual 1*"])
