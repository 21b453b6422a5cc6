"""``python -m ledger.cli``: the ``ledger`` console script, run once."""

from ledger.cli.commands import main

main()
