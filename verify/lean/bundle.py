"""The bundle files beside the ``.lean`` sources that Lean or Lake read (part of ``lean.scan``,
SPEC 8): what the kernel check would trust without its source being scanned.

``bundle_problems(files)`` (path -> bytes, the whole bundle) reports, as ``Problem``s:

1. compiled Lean files (``.olean``, ``.ilean``) and build folders (``.lake/``, ``.ledger-build/``,
   ``lake-packages/``): Lean imports an ``.olean`` without re-checking its proofs, and Lake
   reuses what it finds built, so a shipped one replaces the scanned source;
2. a ``.lean`` file whose module starts with a toolchain library (``Init``, ``Std``, ``Lean``,
   ``Lake``): compiled into the build folder, which comes first on ``LEAN_PATH``, it would replace
   that library's module; and a ``.lean`` suffix in other letter cases (``Evil.LEAN``), which the
   scan would skip;
3. a ``lakefile.toml`` with anything beyond the allow-lists below: ``moreLeanArgs``
   (``--load-dynlib``), ``leanOptions`` outside the scan's option allow-list
   (``debug.skipKernelTC``), ``buildDir``, path dependencies, executables, extern libraries ...

A ``lean-toolchain`` file is no problem of the bundle (real Lean projects carry one): the kernel
check deletes it from its scratch copy, so elan cannot let it pick the Lean version, which the
verifier decides (an old toolchain may have a known soundness bug).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verify.lean.scan import ALLOWED_OPTION_PREFIXES, ALLOWED_OPTIONS, Problem, module_name

BUILD_DIRS = (".lake/", ".ledger-build/", "lake-packages/")
BUILD_SUFFIXES = (".olean", ".ilean", ".olean.tmp")
LIBRARY_ROOTS = frozenset({"Init", "Std", "Lean", "Lake", "LedgerPrintAxioms"})
PACKAGE_KEYS = frozenset(
    {
        "name", "version", "versionTags", "description", "keywords", "homepage", "license",
        "licenseFiles", "readmeFile", "authors", "defaultTargets", "srcDir", "leanOptions",
        "lean_lib", "require",
    }
)  # fmt: skip
LIB_KEYS = frozenset({"name", "srcDir", "roots", "globs", "leanOptions", "defaultFacets"})
REQUIRE_KEYS = frozenset({"name", "scope", "version", "git", "rev", "subDir"})


def bundle_problems(files: Mapping[str, bytes]) -> list[Problem]:
    """Problems with the non-source files of a bundle that the Lean checks would use."""
    out: list[Problem] = []
    for path in sorted(files):
        low = path.lower()
        if low.endswith(BUILD_SUFFIXES) or any(("/" + path).find("/" + d) >= 0 for d in BUILD_DIRS):
            out.append(
                Problem(
                    path,
                    1,
                    1,
                    "compiled Lean output shipped in the bundle (Lean would "
                    "trust it instead of compiling the scanned source)",
                )
            )
        elif low.endswith(".lean") and not path.endswith(".lean"):
            out.append(Problem(path, 1, 1, "Lean source with a suffix other than .lean"))
        elif path.endswith(".lean") and module_name(path).split(".")[0] in LIBRARY_ROOTS:
            out.append(
                Problem(
                    path,
                    1,
                    1,
                    f"module {module_name(path)} would replace a module of "
                    "the Lean toolchain's libraries",
                )
            )
        elif path == "lakefile.toml":
            out.extend(Problem(path, 1, 1, w) for w in lakefile_problems(files[path]))
    return out


def _options(where: str, value: Any) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}.leanOptions is not a table"]
    bad = [
        str(k)
        for k in _flat_keys(value)
        if k not in ALLOWED_OPTIONS and not k.startswith(ALLOWED_OPTION_PREFIXES)
    ]
    return [f"{where}.leanOptions sets {', '.join(bad)} (option not allowed)"] if bad else []


def _flat_keys(table: dict[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for k, v in table.items():
        if isinstance(v, dict):
            keys += _flat_keys(v, f"{prefix}{k}.")
        else:
            keys.append(f"{prefix}{k}")
    return keys


def _unknown(where: str, table: dict[str, Any], allowed: frozenset[str]) -> list[str]:
    bad = sorted(k for k in table if k not in allowed)
    return [f"{where} sets {', '.join(bad)} (not in the allow-list)"] if bad else []


def _src_dir(where: str, table: dict[str, Any]) -> list[str]:
    d = table.get("srcDir", ".")
    if (
        not isinstance(d, str)
        or d.startswith(("/", "\\"))
        or ".." in d.replace("\\", "/").split("/")
    ):
        return [f"{where} srcDir {d!r} leaves the bundle"]
    return []


def lakefile_problems(data: bytes) -> list[str]:
    """What a ``lakefile.toml`` sets beyond a plain library package."""
    import tomllib  # only for a bundle with a lakefile.toml (start-up time, issue 12)

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return [f"lakefile.toml cannot be read ({e})"]
    out = _unknown("lakefile.toml", doc, PACKAGE_KEYS) + _src_dir("lakefile.toml", doc)
    if "leanOptions" in doc:
        out += _options("lakefile.toml", doc["leanOptions"])
    for key, allowed in (("lean_lib", LIB_KEYS), ("require", REQUIRE_KEYS)):
        entries = doc.get(key, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            out.append(f"lakefile.toml: {key} is not a list of tables")
            continue
        for i, entry in enumerate(entries):
            where = f"lakefile.toml {key}[{i}]"
            out += _unknown(where, entry, allowed)
            if "leanOptions" in entry:
                out += _options(where, entry["leanOptions"])
            out += _src_dir(where, entry)
            git = entry.get("git") if key == "require" else None
            if key == "require" and not (isinstance(git, str) and git.startswith("https://")):
                out.append(f"{where} is not a dependency fetched over https")
    return out
