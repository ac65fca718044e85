"""Sphinx configuration for the pynamodb-counters documentation.

Build with warnings as errors (every reference must resolve: ``nitpicky`` below)::

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""
from __future__ import annotations

import os
import sys

# autodoc imports the package from the source tree (it needs pynamodb and blinker installed).
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
# the local extension that resolves the docstrings' references (docs/_ext/references.py)
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "_ext")))

import pynamodb_counters  # noqa: E402

project = "pynamodb-counters"
author = "The pynamodb-counters developers"  # as the package's metadata says (pyproject.toml)
copyright = "The pynamodb-counters developers"
version = pynamodb_counters.__version__
release = pynamodb_counters.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "references",
]

# Links to PynamoDB's and blinker's documentation need their inventories, fetched over the network. CI builds
# offline (warnings are errors there), so they are on only when asked for: DOCS_INTERSPHINX=1 (for a published
# build).
if os.environ.get("DOCS_INTERSPHINX") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "pynamodb": ("https://pynamodb.readthedocs.io/en/stable/", None),
        "blinker": ("https://blinker.readthedocs.io/en/stable/", None),
    }

root_doc = "index"
exclude_patterns = ["_build"]

# Every reference must resolve. The exceptions are names whose documentation lives elsewhere: the inventories of
# Python, PynamoDB and blinker are not fetched offline (see above), so their names resolve only with
# DOCS_INTERSPHINX=1, and annotations name some of them bare, as the package imports them, which no inventory holds.
nitpicky = True
nitpick_ignore = [
    # Python's, named in annotations and docstrings: its inventory is not fetched offline
    ("py:class", "decimal.Decimal"),
    ("py:class", "Decimal"),  # bare, as annotated; no inventory holds it
    ("py:class", "random.Random"),
    ("py:class", "os.PathLike"),
    # PynamoDB's, bare as the package imports them (some only under TYPE_CHECKING): no inventory holds them
    ("py:class", "Model"),
    ("py:class", "Condition"),
    ("py:class", "Action"),
    ("py:exc", "DoesNotExist"),  # each model's own exception class (a pynamodb.exceptions.DoesNotExist)
    # the internal class CountedTransaction.plan() returns (its annotation): shown as text, not documented
    ("py:class", "pynamodb_counters.write._plan.Plan"),
]
nitpick_ignore_regex = [
    # PynamoDB's and blinker's, by full name: their inventories are not fetched offline
    (r"py:.*", r"pynamodb\..*"),
    (r"py:.*", r"blinker\..*"),
]
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "alabaster"
html_title = f"pynamodb-counters {release}"
