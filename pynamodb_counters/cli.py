"""
The ``pynamodb-counters`` command.

Exit codes: ``0`` success, ``1`` the command ran and found a problem, ``2`` usage or configuration error.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from pynamodb.exceptions import PynamoDBException

from . import __version__
from .exceptions import CounterError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pynamodb-counters",
                                     description="Exact reference counters for PynamoDB models.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    demo = commands.add_parser("demo", help="tell the likes story (embedded moto unless --endpoint-url)")
    demo.add_argument("--endpoint-url", help="a DynamoDB endpoint; default: an embedded moto backend")
    demo.add_argument("--region", default="us-east-1")
    demo.add_argument("--table", default="Social", help="table name (created if missing)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; return its exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run

            return run(endpoint_url=args.endpoint_url, region=args.region, table=args.table)
    except (CounterError, PynamoDBException) as error:
        print(f"pynamodb-counters: {error}", file=sys.stderr)
        return 2
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
