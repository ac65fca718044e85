"""Type-check the typing examples: ``pass_*.py`` must be clean under ``mypy --strict``; each line of
``fail_*.py`` marked ``# E: text`` must get an error containing that text, and no other line an error.

Run: ``python tests/typing/check.py`` (the ``typing`` tox env does).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from mypy import api

HERE = Path(__file__).parent


def main() -> int:
    os.environ["MYPYPATH"] = str(HERE)  # fail_*.py import the models of pass_*.py
    failures = []
    for path in sorted(HERE.glob("pass_*.py")) + sorted(HERE.glob("fail_*.py")):
        out, _, _ = api.run(["--strict", "--python-version", "3.9", "--no-error-summary", "--follow-imports",
                             "silent", "--config-file", "", str(path)])
        errors = {}
        for line in out.splitlines():
            match = re.match(rf".*{re.escape(path.name)}:(\d+): error: (.*)", line)
            if match:
                errors.setdefault(int(match.group(1)), []).append(match.group(2))
        expected = {n: m.group(1).strip() for n, text in enumerate(path.read_text().splitlines(), 1)
                    if (m := re.search(r"# E: (.*)$", text))}
        for number, text in expected.items():
            if not any(text in message for message in errors.get(number, [])):
                failures.append(f"{path.name}:{number}: expected an error containing {text!r}, got "
                                f"{errors.get(number)}")
        for number, messages in errors.items():
            if number not in expected:
                failures.append(f"{path.name}:{number}: unexpected error {messages}")
        print(f"{path.name}: {sum(map(len, errors.values()))} error(s), {len(expected)} expected")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
