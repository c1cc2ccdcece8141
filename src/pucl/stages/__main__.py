"""`python -m pucl.stages NAME`: run one stage (what dvc.yaml calls)."""

from __future__ import annotations

import importlib
import sys

from pucl.stages import STAGES
from pucl.stages._harness import main_for


def main(argv: list[str]) -> None:
    if len(argv) != 1 or argv[0] not in STAGES:
        given = argv[0] if argv else "nothing"
        print(f"pucl.stages: error: unknown stage {given!r} (allowed: {', '.join(STAGES)})",
              file=sys.stderr)
        sys.exit(2)
    name = argv[0]
    main_for(name, importlib.import_module(f"pucl.stages.{name}").run)


if __name__ == "__main__":
    main(sys.argv[1:])
