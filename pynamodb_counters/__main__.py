"""``python -m pynamodb_counters``: the same as the ``pynamodb-counters`` command."""
import sys

from .cli import main

sys.exit(main())
