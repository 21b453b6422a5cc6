"""The import graph's layering (issue 11), read from the sources with ``ast``:

- the ledger core (every ``ledger`` module outside the shell ``ledger_cli`` and the public
  library ``ledger.library``) imports neither ``verify`` nor the shell; the library imports
  ``verify`` but never the shell, and nothing below it imports the library (only the package's
  lazy ``ledger.__getattr__`` names it);
- ``verify`` imports none of the ledger's stateful or outer parts (store, log, server, the shell);
- no import cycle among the project's modules (imports under ``TYPE_CHECKING`` are not run, so
  they do not count).

Every import counts, function-level ones included: a cycle closed inside a function is still a
cycle (it only fails later)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("ledger", "ledger_cli", "verify")
SHELL = "ledger_cli"
LIBRARY = "ledger.library"
# what verify may not reach into: the log's state and its outer layers
VERIFY_FORBIDDEN = ("ledger.store.sqlite", "ledger.log", "ledger.http.server", "ledger.mirror",
                    "ledger.submit", "ledger.witness", "ledger.http.web", SHELL)


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports at run time (TYPE_CHECKING blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in mods else module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    # an import of a package's submodule resolves to the nearest project module
    out: set[str] = set()
    for mod in found:
        while mod and mod not in mods:
            mod = mod.rpartition(".")[0]
        if mod and mod != name:
            out.add(mod)
    return out


GRAPH = {name: _imports(name, path, _modules()) for name, path in _modules().items()}


def _in(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def test_graph_is_read() -> None:
    assert "ledger_cli.commands" in GRAPH and "verify.runner" in GRAPH
    assert "verify.runner" in GRAPH["ledger_cli.wiring"]


def test_ledger_core_imports_neither_verify_nor_the_shell() -> None:
    bad = sorted(
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if _in(m, "ledger") and not _in(m, SHELL) and not _in(m, LIBRARY)
        for t in targets
        if _in(t, "verify") or _in(t, SHELL) or (_in(t, LIBRARY) and m != "ledger")
    )
    assert bad == []


def test_the_library_stays_off_the_shell() -> None:
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if _in(m, LIBRARY)
                 for t in targets if _in(t, SHELL))
    assert bad == []


def test_verify_stays_off_the_logs_state_and_the_shell() -> None:
    bad = sorted(
        f"{m} -> {t}"
        for m, targets in GRAPH.items()
        if _in(m, "verify")
        for t in targets
        if any(_in(t, f) for f in VERIFY_FORBIDDEN)
    )
    assert bad == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles() -> None:
    """No cycle at all (issue 11): the engines share ``verify.engine``; in ``verify.ptxsim`` the
    compiler sits above both the compiled form (``program``) and the instruction closures
    (``ops_*``), and ``cp.async`` state lives in ``memory``."""
    assert _cycles() == []


def test_the_shell_has_no_import_cycle() -> None:
    assert [c for c in _cycles() if any(_in(m, SHELL) for m in c)] == []


def test_the_shell_loads_its_command_modules_by_import() -> None:
    """No command module loaded by name (importlib in an ``except ImportError`` once dropped five
    commands silently): the app's module imports each one."""
    assert {"ledger_cli.net", "ledger_cli.scaffold"} <= GRAPH["ledger_cli.commands"]
    for name, path in _modules().items():
        if _in(name, SHELL):
            assert "importlib" not in path.read_text(encoding="utf-8"), name


def test_the_http_side_is_layered() -> None:
    """Per-request state at the bottom (``httpstate``), handlers above it, the app on top: the
    handlers' modules never import the app, and the state imports none of them."""
    assert "ledger.http.server" not in GRAPH["ledger.submit"] | GRAPH["ledger.http.web.pages"]
    assert not GRAPH["ledger.http.state"] & {"ledger.http.server", "ledger.submit",
                                            "ledger.http.web.pages"}
    assert {"ledger.submit", "ledger.http.web.pages",
            "ledger.http.state"} <= GRAPH["ledger.http.server"]
    assert "ledger.http.server" not in GRAPH["ledger.export"]


def test_error_classes_carry_both_exit_code_and_http_status() -> None:
    from ledger.core.errors import (
        BadInput,
        CannotCheck,
        LedgerError,
        TamperDetected,
        UnknownHash,
        VerificationFailed,
    )

    assert [(c.exit_code, c.http_status) for c in (LedgerError, BadInput, UnknownHash,
                                                  VerificationFailed, TamperDetected,
                                                  CannotCheck)] == [
        (2, 400), (2, 400), (2, 404), (1, 422), (1, 422), (3, 503)]


# Where bytes may still become text outside ledger.core.encoding, and why.
CONVERSION_EXCEPTIONS = {
    # PTX float literals 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX are IEEE bit patterns written in hex
    # (PTX ISA, floating-point constants): parsed beside the other numeric literals, not data
    "verify.ptxsim.values",
}
# modules that still convert while another issue's work has them open; empty when none
PENDING: set[str] = set()


def _conversions(path: Path) -> list[str]:
    """Where a module turns bytes into hex or base64 text or back: imports of base64, binascii
    or codecs, and calls of ``.hex()``, ``.fromhex()`` or ``.hexdigest()``."""
    found = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            mods = ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
            found += [f"{path.name}:{n.lineno}: import {m}" for m in mods
                      if m.split(".")[0] in ("base64", "binascii", "codecs")]
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("hex", "fromhex", "hexdigest")):
            found.append(f"{path.name}:{n.lineno}: .{n.func.attr}()")
    return found


def test_hex_and_base64_live_in_encoding_only() -> None:
    """Bytes become hex or base64 text and back in ``ledger.core.encoding`` only (strict decoders
    that raise ``BadInput``, one spelling of each encoding); the exceptions are listed above."""
    allowed = {"ledger.core.encoding"} | CONVERSION_EXCEPTIONS | PENDING
    bad = {name: hits for name, path in _modules().items()
           if name not in allowed and (hits := _conversions(path))}
    assert bad == {}
    # the scan sees what it looks for
    assert _conversions(_modules()["ledger.core.encoding"])
    assert all(_conversions(_modules()[m]) for m in CONVERSION_EXCEPTIONS)


def test_one_note_text_helper() -> None:
    """The signed text of a note is cut in one place (``ledger.core.note.note_text``, which raises
    on a
    note without its blank line): no module keeps its own copy."""
    copies = sorted(
        name for name, path in _modules().items()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.FunctionDef) and n.name.lstrip("_") in ("note_text", "checkpoint_text")
    )
    assert copies == ["ledger.core.note"]
    # nor cuts a note at its blank line inline (note[: note.index(b"\n\n") + 1])
    inline = sorted(
        f"{name}:{n.lineno}" for name, path in _modules().items() if name != "ledger.core.note"
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("index", "find", "rfind") and n.args
        and isinstance(n.args[0], ast.Constant) and n.args[0].value == b"\n\n"
    )
    assert inline == []


def test_one_instruction_kind_enum() -> None:
    """The interpreter's instruction kinds are one enum (``verify.ptxsim.program.Kind``): no other
    module of ``verify.ptxsim`` keeps its own integer copies of them."""
    names = {"NORMAL", "BRANCH", "EXIT", "BARRIER"}
    copies = sorted(
        name for name, path in _modules().items()
        if _in(name, "verify.ptxsim") and name != "verify.ptxsim.program"  # where Kind is
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.Assign)
        and any(isinstance(v, ast.Constant) for v in ast.walk(n.value))
        and any(isinstance(t, ast.Name) and t.id in names
                for tgt in n.targets for t in ast.walk(tgt))
    )
    assert copies == []
    from verify.ptxsim import machine, ops
    from verify.ptxsim.program import Kind

    assert machine.NORMAL is Kind.NORMAL and machine.BARRIER is Kind.BARRIER
    assert "NORMAL" not in vars(ops)


def _calls_and_imports(path: Path) -> tuple[set[str], set[str]]:
    """Dotted names a module calls (``httpx.Client``, ``os.replace``) and the modules it
    imports."""
    calls: set[str] = set()
    imports: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            imports |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            imports.add(n.module or "")
        elif isinstance(n, ast.Call):
            parts, f = [], n.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                calls.add(".".join([f.id, *reversed(parts)]))
    return calls, imports


def test_one_http_client() -> None:
    """Every outgoing HTTP request goes through ``ledger.net.client`` (``HttpClient`` and its
    lean static path ``LeanGet``, both bounded in time and size): no other module makes an httpx
    client or transport, sends with httpx's functions, or opens an ``http.client`` or
    ``urllib.request`` connection."""
    sending = {f"httpx.{f}" for f in ("get", "post", "put", "head", "request", "stream",
                                      "Client", "AsyncClient", "HTTPTransport")}
    bad = {}
    for name, path in _modules().items():
        if name == "ledger.net.client":
            continue
        calls, imports = _calls_and_imports(path)
        hits = sorted(calls & sending) + sorted(
            i for i in imports if i in ("http.client", "urllib.request", "httpcore", "requests"))
        if hits:
            bad[name] = hits
    assert bad == {}
    calls, imports = _calls_and_imports(_modules()["ledger.net.client"])
    assert "http.client" in imports and calls & sending  # the scan sees what it looks for


def test_one_atomic_file_writer() -> None:
    """Files are replaced atomically in one place, ``ledger.core.fsutil.write_atomic`` (temporary
    file
    in the target's directory, fsync, rename, directory fsync): no other module makes its own
    temporary file and renames it over the target. ``os.rename`` stays for moving whole
    directories: ``ledger.log`` (a new ledger into place) and ``ledger.store.copy`` (the SQLite file
    kept aside)."""
    renaming = {"os.replace", "os.rename", "shutil.move"}
    moves_dirs = {"ledger.log", "ledger.store.copy"}
    bad = {}
    for name, path in _modules().items():
        if name == "ledger.core.fsutil":
            continue
        calls, _ = _calls_and_imports(path)
        hits = sorted(c for c in calls if c in renaming or c.endswith(".mkstemp")
                      or c.endswith("NamedTemporaryFile"))
        if name in moves_dirs:
            hits = [h for h in hits if h != "os.rename"]
        if hits:
            bad[name] = hits
    assert bad == {}
    calls, _ = _calls_and_imports(_modules()["ledger.core.fsutil"])
    assert {"os.replace", "tempfile.mkstemp"} <= calls  # the scan sees what it looks for
