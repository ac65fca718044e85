"""
Audits from a DynamoDB table export: where its files are (``_sources``: a folder, or S3), reading them
(``_files``), what a counter's children and parents add up to in them (``_counts``, with the export's own
conditions in ``_conditions``), the engines the computation runs on (``_engines``: this machine's cores, or
Spark), and the audit that puts them together (``_audit``). Internal: :func:`pynamodb_counters.audit` with
``export=`` is the way in.
"""
