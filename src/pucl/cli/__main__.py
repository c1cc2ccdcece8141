"""`python -m pucl.cli`: the same as the `pucl` command."""

from pucl.cli import main

main()
