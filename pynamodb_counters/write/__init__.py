"""
The write path: one unit of work for ``save()``, ``delete()``, ``update()``, a
:class:`~pynamodb_counters.CountedTransaction` and the bulk writes, in the order a write takes it.

The caller's write, checked and frozen (``_writes``), and whether counting is skipped (``_skipping``); the stored
child (``_stored``) and what raw items hold (``_items``); the one function that decides every change
(``_deltas``); the conditions (``_conditions``); one class per action of a transaction (``_actions``; a stream
record's marker in ``_markers``); the plan of one transaction (``_plan``) and the chunks of a bulk write
(``_chunks``); the sender (``_send``) and the reads (``_fetches``); what a refusal teaches and the recoveries
(``_recoveries``); and the unit of work that runs them (``_commit``). Repairs (``_set_counter``) and shard items
(``_shard_items``) send their own requests. Internal: import from :mod:`pynamodb_counters`.
"""
