"""
The async side of the library: ``await like.asave()``, ``adelete()``, ``aupdate()``, ``Model.aget()``,
``arefresh()``, ``CounterField.atotal()`` / ``atotals()`` and ``async with CountedTransaction()``, sent through
aiobotocore (``pip install "pynamodb-counters[async]"``) on the running event loop, with the decisions of their
sync twins (one decision loop, two drivers: ``transport``).

Each event loop makes its own clients on first use; :func:`aclose` closes those of the running loop (an app's
shutdown: a FastAPI lifespan's end, say). A loop that ends without it (``asyncio.run()``) closes them as it shuts
down.
"""
from ..transport._async import aclose

__all__ = ["aclose"]
