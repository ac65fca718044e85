"""The pytest plugin, as a user's suite sees it: two lines of conftest, then fixtures (run with pytester)."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # each test runs pytest in a subprocess

MODELS = '''
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from pynamodb_counters import CounterField, CounterMixin, counted_by


class Post(CounterMixin, Model):
    class Meta:
        table_name = "PluginSocial"
        region = "us-east-1"
    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    like_tally = CounterField()

    @classmethod
    def audit_filter(cls):
        return cls.sk == "META"


class Like(CounterMixin, Model):
    class Meta:
        table_name = "PluginSocial"
        region = "us-east-1"
    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    liked_at = NumberAttribute()
    post = counted_by(Post.like_tally, key=lambda like: (like.pk, "META"), prefix="LIKE#")
'''

CONFTEST = '''
import pytest
from app_models import Post
counters_models = pytest.fixture(lambda: [Post])
'''

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


def make_suite(pytester: pytest.Pytester, expected_kind: str, conftest: str = CONFTEST) -> None:
    pytester.makepyfile(app_models=MODELS)
    pytester.makeconftest(conftest)
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
    pytester.makepyfile(app_models=MODELS)
    pytester.makeconftest(CONFTEST)
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
