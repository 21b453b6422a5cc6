"""``python -m ledger_cli``: the ``ledger`` console script, run once."""

from ledger_cli import main

main()
