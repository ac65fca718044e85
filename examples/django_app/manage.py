#!/usr/bin/env python
"""Django's command-line utility for the likes example."""
from __future__ import annotations

import os
import sys


def main() -> None:
    """Run a management command (``runserver``, ``create_table``, ``check``...)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "likes_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
