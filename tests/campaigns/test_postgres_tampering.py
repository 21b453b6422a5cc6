"""Red-team of the PostgreSQL store (tests/campaigns/test_stored_log_tampering.py's attacks
replayed on
``ledger init --db postgresql://...``): an attacker with access to the database as a superuser,
who can bypass the append-only protections (``session_replication_role = replica`` leaves every
trigger in place and makes none fire; or drops, disables or rewrites them) and edit any row. Each
test alters a real ledger on a real server (``tests.helpers.postgres``, skipped with the reason
where it cannot start), runs the real CLI and requires what the SQLite store gives: exit 1 with one
clear line or a failed check, never exit 0, 2 or 3, never a traceback. Also: a server that goes
away mid-command (exit 3), a wrong password (exit 3, never printed), and a database that is not a
ledger (refused, exit 2, unchanged). docs/threat-model.md section 6 lists what each change meets.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger.core import merkle
from ledger.core.errors import TamperDetected
from ledger.keys import load_node_secret
from ledger.log import Log
from ledger.store import postgres as pgstore
from tests.helpers.ledgers import (
    add_node,
    audit_problems,
    check_table,
    cli_json,
    one_line,
    run_cli,
    seal_fake,
)
from tests.helpers.postgres import PgServer, pg_server

__all__ = ["pg_server"]  # the session fixture, used by name below

N = 3  # bundle entries after the registration at index 0
BYPASS = "SET session_replication_role = replica; "  # superuser: the triggers stay, none fires


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    c = tmp_path / "cache"
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(c))
    return c


class Pg:
    """One ledger on the server: its home, URL and database name."""

    def __init__(self, server: PgServer, tmp: Path, n: int = N) -> None:
        self.server = server
        self.url = server.new_database()
        self.db = self.url.rsplit("/", 1)[1]
        self.home = tmp / "home"
        log = Log.init(self.home, "test.example/log", self.url)
        sk = add_node(log)
        for i in range(n):
            seal_fake(log, sk, tmp / "b", str(i))
        log.close()

    def admin(self, sql: str, *args: Any) -> list[Any]:
        with psycopg.connect(self.server.url(self.db, "admin"), autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), args or None)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def alter(self, sql: str, *args: Any) -> None:
        """``sql`` with every trigger bypassed and left in place (audit sees no drop)."""
        with psycopg.connect(self.server.url(self.db, "admin"), autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")
            conn.execute(sql.replace("?", "%s"), args or None)  # type: ignore[arg-type]

    def entry(self, idx: int) -> bytes:
        return bytes(self.admin("SELECT data FROM entries WHERE idx=?", idx)[0][0])


@pytest.fixture()
def pg(pg_server: PgServer, tmp_path: Path, cache: Path) -> Pg:
    return Pg(pg_server, tmp_path)





def _failed(home: Path, idx: int) -> set[str]:
    rep = cli_json("verify", str(idx), home=home, ok=(1,))
    return {k for k, (status, _) in check_table(rep).items() if status == "failed"}


def test_row_changes_with_the_triggers_bypassed_are_caught(pg: Pg) -> None:
    """A byte of a blob, of an entry, of a stored hash, an entry that no longer decodes: audit
    and verify as on SQLite, with every trigger still in place (so no "dropped" line helps)."""
    pg.alter("UPDATE blobs SET data=? WHERE data=?", b"// ptx 9\n", b"// ptx 1\n")
    assert any("does not hash to its address" in p for p in audit_problems(pg.home))
    assert "integrity.manifest" in _failed(pg.home, 2)
    pg.alter("UPDATE blobs SET data=? WHERE data=?", b"// ptx 1\n", b"// ptx 9\n")
    pg.alter("UPDATE hashes SET hash=? WHERE level=0 AND n=3", bytes(32))
    assert any("stored hash (0, 3)" in p for p in audit_problems(pg.home))
    e = bytearray(pg.entry(2))
    e[20] ^= 1
    pg.alter("UPDATE entries SET data=? WHERE idx=2", bytes(e))
    assert any("entry 2: bytes do not hash to the stored leaf hash" in p
               for p in audit_problems(pg.home))
    assert {"integrity.inclusion", "integrity.signature"} <= _failed(pg.home, 2)
    pg.alter("UPDATE entries SET data=? WHERE idx=2", b"\xff\x00not json")
    for args in (("show", "2"), ("log",)):
        one_line(run_cli(*args, home=pg.home), 1, "entry 2 as stored is not a valid entry")
    rep = cli_json("verify", "2", home=pg.home, ok=(1,))
    status, detail = check_table(rep)["integrity.manifest"]
    assert status == "failed" and "entry 2 is malformed" in detail


def test_an_entry_rewritten_with_its_hashes_recomputed_is_caught(pg: Pg) -> None:
    forged = pg.entry(1).replace(b'"k0"', b'"kX"')
    pg.alter("UPDATE entries SET data=?, leaf_hash=? WHERE idx=1", forged, merkle.leaf_hash(forged))
    leaves = [bytes(r[0]) for r in pg.admin("SELECT leaf_hash FROM entries ORDER BY idx")]
    tree = merkle.Frontier()
    pg.alter("DELETE FROM hashes")
    for level, n, h in (row for leaf in leaves for row in tree.append(leaf)):
        pg.alter("INSERT INTO hashes VALUES(?, ?, ?)", level, n, h)
    problems = audit_problems(pg.home)
    assert any("entry 1: entry signature does not verify" in p for p in problems)
    assert any("does not match the recomputed root" in p for p in problems)
    assert {"integrity.inclusion", "integrity.signature"} <= _failed(pg.home, 1)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM meta WHERE key='vkey'", ("records no verifier key", "log.vkey")),
        ("UPDATE meta SET value='garbage' WHERE key='vkey'", ("no valid verifier key",)),
        ("DELETE FROM meta WHERE key='origin'", ("holds checkpoints but no origin",)),
    ],
)
def test_an_altered_meta_table_is_tampering(pg: Pg, sql: str, words: tuple[str, ...]) -> None:
    pg.alter(sql)
    for args in (("audit",), ("log",), ("show", "1"), ("verify", "1")):
        one_line(run_cli(*args, home=pg.home), 1, *words)


def test_index_checkpoint_and_key_rows(pg: Pg) -> None:
    """The newest checkpoints deleted, a forged row at index -1, the key index altered: audit
    names each (triggers in place), lookups ignore the hidden row, verify says why without a
    checkpoint."""
    forged = pg.entry(1).replace(b'"k0"', b'"kX"')
    pg.alter("INSERT INTO entries VALUES(-1, ?, ?, 'bundle', ?)", b"\x01" * 32, forged,
             b"\xee" * 32)
    pg.alter("DELETE FROM checkpoints WHERE size=?", N + 1)
    pg.alter("INSERT INTO revocations SELECT key_id, 1, 'forged' FROM keys")
    problems = audit_problems(pg.home)
    assert "1 entry rows have a negative index: rows outside the log" in problems
    assert any(f"no checkpoint covers the log's {N + 1} entries (newest: size {N})" in p
               for p in problems)
    assert any("key index row" in p and "does not match the log's key entries" in p
               for p in problems)
    one_line(run_cli("show", "ee" * 32, home=pg.home), 2, "no bundle digest or leaf hash")
    pg.alter("DELETE FROM checkpoints")
    one_line(run_cli("verify", "1", home=pg.home), 1, "no checkpoint", "ledger audit")


def test_truncation_is_caught_by_the_head_or_the_checkpoint_memory(
    pg: Pg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last entry deleted with its hashes and checkpoint: with the head left alone the
    database itself shows it; with the head lowered too, the memory of an earlier audit does."""
    assert cli_json("audit", home=pg.home)["ok"] is True
    pg.alter("DELETE FROM entries WHERE idx=?", N)
    pg.alter("DELETE FROM hashes WHERE NOT (level=0 AND n<?) AND NOT (level=1 AND n<?)",
             N, N // 2)
    pg.alter("DELETE FROM checkpoints WHERE size=?", N + 1)
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(tmp_path / "other-machine"))
    assert f"the tree head says {N + 1} entries, the audited log has {N}" in audit_problems(pg.home)
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(tmp_path / "cache"))
    pg.alter("UPDATE head SET size=?", N)
    assert any(f"older than the size {N + 1}" in p and "lost entries" in p
               for p in audit_problems(pg.home))


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("ALTER TABLE entries ENABLE REPLICA TRIGGER entries_no_update",
         "entries_no_update has been dropped or altered"),
        ("ALTER TABLE head DISABLE TRIGGER head_grows", "head_grows has been dropped"),
        ("DROP TRIGGER hashes_no_delete ON hashes; CREATE TRIGGER hashes_no_delete BEFORE DELETE "
         "ON hashes FOR EACH ROW WHEN (false) EXECUTE FUNCTION ledger_append_only()",
         "hashes_no_delete has been dropped or altered"),
        ("CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS "
         "$$ BEGIN RETURN coalesce(NEW, OLD); END $$",
         "trigger function ledger_append_only() was altered"),
        ("CREATE RULE hide AS ON INSERT TO checkpoints DO INSTEAD NOTHING",
         "rule hide on table checkpoints"),
        ("CREATE FUNCTION drop_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; "
         "END $$; CREATE TRIGGER quiet BEFORE INSERT ON entries FOR EACH ROW EXECUTE FUNCTION "
         "drop_row()", "trigger quiet on table entries is not the ledger's"),
        ("ALTER ROLE ledger SET session_replication_role = replica",
         "session_replication_role=replica"),
    ],
)
def test_append_only_protections_subverted_in_place_are_reported(
    pg: Pg, sql: str, words: str
) -> None:
    """Triggers kept by name but made inert (replica-only, disabled, a WHEN condition, a
    permissive function), a rule or a foreign trigger that can swallow writes, the ledger's own
    sessions put in replica mode: the audit used to pass all but the disabled one."""
    try:
        pg.admin(sql)
        res = run_cli("audit", home=pg.home)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert words in res.stderr, res.stderr
    finally:
        pg.admin("ALTER ROLE ledger RESET ALL")


def test_a_seal_whose_rows_a_rule_swallows_is_refused_not_acknowledged(
    pg: Pg, tmp_path: Path
) -> None:
    """A rule that makes the entries' INSERT do nothing: the seal used to return an index and
    commit the head over an entry that was never stored. Now the head's update checks the rows."""
    pg.admin("CREATE RULE swallow AS ON INSERT TO entries DO INSTEAD NOTHING")
    log = Log.open(pg.home)
    sk = load_node_secret(log.keydir, "node")[0]
    with pytest.raises(TamperDetected, match="not in the database's entries table"):
        seal_fake(log, sk, tmp_path / "late", "late")
    log.close()
    assert pg.admin("SELECT size FROM head") == [(N + 1,)]
    assert pg.admin("SELECT max(size) FROM checkpoints") == [(N + 1,)]


@pytest.mark.parametrize("table", ["checkpoints", "head", "keys"])
def test_a_dropped_table_is_tampering_for_every_command(pg: Pg, table: str) -> None:
    pg.admin(f"DROP TABLE {table}")
    for args in (("audit",), ("log",), ("verify", "1")):
        one_line(run_cli(*args, home=pg.home), 1, f"lacks its table(s) {table}",
                  "was altered")


class CuttingProxy:
    """A TCP proxy to the server that closes both sides once ``budget`` bytes came back from
    it (never, for None): the server going away mid-command, at a chosen point of the
    conversation. ``seen`` counts the bytes that came back."""

    def __init__(self, port: int, budget: int | None) -> None:
        self.port, self.budget, self.seen = port, budget, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.listen_port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, count: bool) -> None:
        try:
            while data := src.recv(65536):
                if count:
                    self.seen += len(data)
                    if self.budget is not None and self.seen > self.budget:
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture()
def proxies() -> Iterator[list[CuttingProxy]]:
    made: list[CuttingProxy] = []
    yield made
    for p in made:
        p.close()


def test_a_server_that_goes_away_mid_command_is_exit_3(
    pg: Pg, proxies: list[CuttingProxy]
) -> None:
    """Each command run once through a proxy that counts what the server sends, then again
    through one that cuts the connection during its start (200 bytes) and halfway through that
    count (the ledger opened, the log being read): exit 3, one line, nothing else."""
    url_file = pg.home / "db.url"

    def through(budget: int | None) -> CuttingProxy:
        proxy = CuttingProxy(pg.server.port, budget)
        proxies.append(proxy)
        url_file.write_text(pg.url.replace(f":{pg.server.port}/", f":{proxy.listen_port}/") + "\n")
        return proxy

    for args in (("audit", "--json"), ("log",), ("verify", "1", "--json"), ("show", "1")):
        whole = through(None)
        assert run_cli(*args, home=pg.home).returncode in (0, 1)  # verify: the fake bundle
        for budget in (200, whole.seen // 2):
            through(budget)
            one_line(run_cli(*args, home=pg.home), 3, "ledger database")


def test_a_wrong_password_is_exit_3_and_never_printed(pg_server: PgServer, tmp_path: Path) -> None:
    """A role that must give its password (scram-sha-256 for it alone on this server): a wrong
    one, in the URL's user part or as a ``password=`` parameter (which used to be printed), is
    exit 3 with one line that does not show it; nothing is created."""
    hba = Path(pg_server.admin_execute("SHOW hba_file")[0][0])
    if "pwuser" not in hba.read_text():
        hba.write_text("host all pwuser 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        pg_server.admin_execute("CREATE ROLE pwuser LOGIN PASSWORD 'right-one'")
        pg_server.admin_execute("SELECT pg_reload_conf()")
        time.sleep(0.3)
    db = pg_server.new_database().rsplit("/", 1)[1]
    pg_server.admin_execute(f"ALTER DATABASE {db} OWNER TO pwuser")
    base = f"127.0.0.1:{pg_server.port}/{db}"
    for i, url in enumerate((f"postgresql://pwuser:Wr0ngSecret@{base}",
                             f"postgresql://pwuser@{base}?password=Wr0ngSecret",
                             f"postgresql://pwuser@{base}?sslmode=disable&pass%77ord=Wr0ngSecret")):
        home = tmp_path / f"h{i}"
        res = run_cli("init", "--origin", "o.example/x", "--db", url, home=home)
        line = one_line(res, 3, "password authentication failed")
        assert "Wr0ngSecret" not in res.stderr + res.stdout and "***" in line
        assert not (home / "db.url").exists()
    assert "Wr0ngSecret" not in pgstore.shown_url("postgresql://u@h/d?PASSWORD=Wr0ngSecret")


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE migrations(id serial PRIMARY KEY, migration text, batch int)",  # Laravel's
        "CREATE TABLE migrations(version int PRIMARY KEY); INSERT INTO migrations VALUES (1)",
        "CREATE TABLE meta(k text)",
        "CREATE TABLE customers(id int); INSERT INTO customers VALUES (7)",
    ],
)
def test_a_database_that_is_not_a_ledger_is_refused_and_unchanged(
    pg_server: PgServer, tmp_path: Path, sql: str
) -> None:
    """``init``, ``db copy --to`` and a ``db.url`` naming another program's database: exit 2,
    one line, the database as it was. (A ``migrations`` table used to pass for a ledger: open
    ran migration 2 on it; a table named like one of the ledger's made init exit 3; other
    tables got the ledger's mixed in.)"""
    url = pg_server.new_database()
    db = url.rsplit("/", 1)[1]
    pg_server.admin_execute(f"SET ROLE ledger; {sql}", db)
    listing = ("SELECT table_name FROM information_schema.tables "
               "WHERE table_schema='public' ORDER BY 1")
    before = pg_server.admin_execute(listing, db)
    res = run_cli("init", "--origin", "o.example/x", "--db", url, home=tmp_path / "a")
    one_line(res, 2, "is not a ledger database", "nothing was written")
    assert not (tmp_path / "a" / "log.key").exists()
    Log.init(tmp_path / "sq", "o.example/y").close()
    one_line(run_cli("db", "copy", "--to", url, home=tmp_path / "sq"), 2,
              "is not a ledger database")
    assert (tmp_path / "sq" / "ledger.db").exists()
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "db.url").write_text(url + "\n")
    os.chmod(home / "db.url", 0o600)
    for args in (("log",), ("audit",)):
        one_line(run_cli(*args, home=home), 2, "is not a ledger database")
    assert pg_server.admin_execute(listing, db) == before
