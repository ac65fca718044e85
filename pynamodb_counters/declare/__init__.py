"""
Declarations: what a model declares and what it compiles to, checked when its class is made. No I/O.

:class:`~pynamodb_counters.CounterField` (``_attributes``); :func:`~pynamodb_counters.counted_by` and
:class:`~pynamodb_counters.Relation`, and the rules a declaration must pass (``_relations``); how expiring children
are counted (``_expiry_rules``); the shard layout (``_shards``); the attributes the library stores on items
(``_counted``); and each model's compiled spec, its relations compiled with it (``_spec``): what the write path
reads, built once, so that a warm write never calls into this folder. Internal: import from
:mod:`pynamodb_counters`.
"""
