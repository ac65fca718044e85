"""
DynamoDB I/O as a port: the library's decisions (a commit, its recoveries, a reshape, the reads of the write path)
are decision loops that yield the requests they need (:class:`Call`) and are answered (an ``Answer``); two thin
drivers send them, the sync one through botocore, the async one through aiobotocore (the ``async`` extra).

The seam for tests, the library's and yours: an :class:`Interceptor`, installed with :func:`intercepting`, sees
every request before DynamoDB does and after it answers, under both drivers.
"""
from ._calls import Answer, Call, Wait
from ._intercept import Interceptor, intercepting

__all__ = ["Answer", "Call", "Interceptor", "Wait", "intercepting"]
