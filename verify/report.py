"""Check results and the verification report of SPEC 8.

Each check returns a frozen ``Check``; a ``Report`` collects them and derives the verdict, failing
closed: a report with no checks is ``failed``. ``Report.to_json()`` is exactly the SPEC 8 object;
``Check.to_record()`` adds the tool and its version, as a ``bundle`` entry records them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["passed", "failed", "skipped"]
STATUSES: tuple[str, ...] = ("passed", "failed", "skipped")


@dataclass(frozen=True)
class Check:
    """One check's outcome. ``detail`` always says what was checked, or why it was skipped."""

    id: str
    status: Status
    detail: str
    tool: str = ""
    version: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"bad check status {self.status!r}")
        if not self.id:
            raise ValueError("check id is empty")

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "status": self.status, "detail": self.detail}

    def to_record(self) -> dict[str, str]:
        return {
            "id": self.id,
            "status": self.status,
            "detail": self.detail,
            "tool": self.tool,
            "version": self.version,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Check:
        status = rec.get("status")
        if status not in STATUSES:
            raise ValueError(f"bad check status {status!r}")
        return cls(
            id=str(rec["id"]),
            status=status,
            detail=str(rec.get("detail", "")),
            tool=str(rec.get("tool", "")),
            version=str(rec.get("version", "")),
        )


def passed(id: str, detail: str, tool: str = "", version: str = "") -> Check:
    return Check(id, "passed", detail, tool, version)


def failed(id: str, detail: str, tool: str = "", version: str = "") -> Check:
    return Check(id, "failed", detail, tool, version)


def skipped(id: str, detail: str, tool: str = "", version: str = "") -> Check:
    return Check(id, "skipped", detail, tool, version)


@dataclass(frozen=True)
class Report:
    bundle_digest: str
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> Literal["verified", "partial", "failed"]:
        if not self.checks or any(c.status == "failed" for c in self.checks):
            return "failed"
        if any(c.status == "skipped" for c in self.checks):
            return "partial"
        return "verified"

    def with_checks(self, more: Iterable[Check]) -> Report:
        return Report(self.bundle_digest, self.checks + tuple(more))

    def get(self, check_id: str) -> Check | None:
        for c in self.checks:
            if c.id == check_id:
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "bundle_digest": self.bundle_digest,
            "checks": [c.to_json() for c in self.checks],
        }
