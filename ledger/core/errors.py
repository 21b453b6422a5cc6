"""The one error tree of the project, and the exit code each branch maps to (SPEC 7).

    LedgerError                      base; never raised directly
    ├── BadInput            exit 2   bad input or usage: the user can fix the command or the file
    │   ├── BundleError              a bundle directory breaks SPEC 3 or its limits
    │   ├── ContractError            a contract cannot be read
    │   ├── KeyFileError             a key file is missing, malformed, or its passphrase is wrong
    │   ├── UnknownHash              no entry matches a hash or index (or a prefix is ambiguous)
    │   ├── LedgerStateError         no ledger at LEDGER_HOME, or one exists already
    │   └── NotRegistered            a log refused a node key it does not hold registered
    ├── VerificationFailed  exit 1   tampering, a bad signature or proof, a failed check
    │   ├── ProofError               an inclusion or consistency proof does not verify
    │   ├── SignatureError           a signature, signed note or key id does not verify
    │   ├── TamperDetected           stored bytes no longer match their hashes or chain
    │   ├── RewriteDetected          a remote log contradicts a checkpoint already verified
    │   └── PolicyError              a verified entry does not meet the consumer's policy
    └── CannotCheck         exit 3   a required check could not run; database/mirror unreachable

Every error carries a message a user can act on. Foreign exceptions are wrapped with
``raise X(...) from e`` at the boundary where they occur; the CLI maps this tree to exit codes in
one place (``ledger_cli.commands.main``) and prints one line on stderr.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error this project raises on purpose. ``exit_code`` is what the CLI exits
    with, ``http_status`` what the server answers; both are decided here, once."""

    exit_code: int = 2
    http_status: int = 400


class BadInput(LedgerError):
    exit_code = 2


class BundleError(BadInput):
    pass


class ContractError(BadInput):
    pass


class KeyFileError(BadInput):
    pass


class UnknownHash(BadInput):
    http_status = 404


class LedgerStateError(BadInput):
    pass


class NotRegistered(BadInput):
    """A log refused a submission: the node key is not registered there, or was revoked
    (exit 2: the fix is the operator's ``ledger keys register``, ``ledger.onboard``)."""


class VerificationFailed(LedgerError):
    exit_code = 1
    http_status = 422


class ProofError(VerificationFailed):
    pass


class SignatureError(VerificationFailed):
    pass


class TamperDetected(VerificationFailed):
    pass


class RewriteDetected(VerificationFailed):
    pass


class PolicyError(VerificationFailed):
    """The entry verified, but the consumer's trust policy refuses it (SPEC 10 "Library"):
    ``rule`` names the policy field that failed (``signers``, ``checks``, ``obligations``,
    ``verdict``, ``oracles``, ``quorum``, ``oldest_checkpoint``, ``lock``), ``reason`` says why."""

    def __init__(self, rule: str, reason: str) -> None:
        super().__init__(f"policy {rule}: {reason}")
        self.rule = rule
        self.reason = reason


class CannotCheck(LedgerError):
    exit_code = 3
    http_status = 503
