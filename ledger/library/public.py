"""Small public helpers of the library (``ledger.__all__``)."""

from __future__ import annotations

from pathlib import Path

from ledger.trust import Policy


def load_policy(path: str | Path | None = None) -> Policy:
    """The policy file at ``path``, else the one ``ledger verify`` would use (``$LEDGER_POLICY``,
    else ``$XDG_CONFIG_HOME/kernel-ledger/policy.json``): the same reader as ``--policy``, so an
    unknown field is an error. ``BadInput`` when there is none."""
    from ledger.core.errors import BadInput
    from ledger.trust import load_policy as read
    from ledger.trust import policy_path

    found = policy_path(Path(path) if path is not None else None)
    if found is None:
        raise BadInput("no policy file: give one, or set LEDGER_POLICY")
    return read(found)
