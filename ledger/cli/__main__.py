"""``python -m ledger.cli``: the ``ledger`` console script, run once."""

from ledger.cli import main

main()
