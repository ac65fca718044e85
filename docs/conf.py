"""Sphinx configuration for the pynamodb-counters documentation.

Build with warnings as errors::

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""
from __future__ import annotations

import os
import sys

# autodoc imports the package from the source tree (it needs pynamodb and blinker installed).
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import pynamodb_counters  # noqa: E402

project = "pynamodb-counters"
author = "pynamodb-counters contributors"
copyright = "pynamodb-counters contributors"
version = pynamodb_counters.__version__
release = pynamodb_counters.__version__

# No sphinx.ext.intersphinx: CI builds the docs without network access, and intersphinx would fetch inventories.
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
]

root_doc = "index"
exclude_patterns = ["_build"]

nitpicky = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "alabaster"
html_title = f"pynamodb-counters {release}"
