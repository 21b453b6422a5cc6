"""Property tests driven by the server's own OpenAPI description (/api/v1/openapi.json): for every
documented operation, hypothesis draws parameters (valid and out of range) from the described
schemas; every answer must be a documented status, never a 5xx, and every JSON 200 answer must
carry the documented required fields with the documented types."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.http.server import make_app
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import build_ledger

SPEC = json.loads((Path(__file__).resolve().parents[3] / "ledger" / "http" / "templates"
                  / "openapi.json").read_text())
OPERATIONS = sorted(SPEC["paths"])
TYPES = {"integer": int, "string": str, "array": list, "object": dict}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    home = tmp_path_factory.mktemp("openapi") / "home"
    build_ledger(home, 40).close()
    with BackgroundServer(make_app(home)) as srv, httpx.Client(base_url=srv.url) as c:
        yield c


def value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the schema's type, valid or not (out of range, off-pattern)."""
    kind = schema.get("type")
    if kind == "integer":
        return st.one_of(st.integers(0, 60), st.integers(-3, 2**70))
    if kind == "array":
        return st.lists(value_for(schema["items"]), min_size=0, max_size=70)
    pattern = schema.get("pattern")
    text = st.text(st.characters(min_codepoint=32, max_codepoint=0x24F), max_size=70)
    if pattern:
        return st.one_of(st.from_regex(pattern, fullmatch=True), text)
    return st.one_of(text, st.sampled_from(["0", "1", "00000000", "tile", "..", "x001"]))


@st.composite
def request_for(draw: st.DrawFn, path: str) -> tuple[str, list[tuple[str, str]]]:
    op = SPEC["paths"][path]["get"]
    url = path
    query: list[tuple[str, str]] = []
    for p in op.get("parameters", []):
        if p["in"] == "query" and not p["required"] and draw(st.booleans()):
            continue
        v = draw(value_for(p["schema"]))
        if p["in"] == "path":
            url = url.replace("{" + p["name"] + "}", quote(str(v), safe="") or "x")
        elif isinstance(v, list):
            query.extend((p["name"], str(x)) for x in v)
        else:
            query.append((p["name"], str(v)))
    return url, query


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        out: dict[str, Any] = SPEC["components"]["schemas"][ref.rsplit("/", 1)[1]]
        return out
    return schema


def check_json(schema: dict[str, Any], value: Any) -> None:
    schema = resolve(schema)
    if value is None:
        assert schema.get("nullable"), schema
        return
    want = TYPES.get(schema.get("type", ""))
    if want is not None:
        assert isinstance(value, want) and not isinstance(value, bool), (schema, value)
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, (key, value)
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                check_json(sub, value[key])
    if isinstance(value, list) and "items" in schema:
        for item in value:
            check_json(schema["items"], item)
    if isinstance(value, str) and "pattern" in schema:
        assert re.fullmatch(schema["pattern"], value), (schema["pattern"], value)
    if isinstance(value, int) and "minimum" in schema:
        assert value >= schema["minimum"]


@pytest.mark.parametrize("path", OPERATIONS)
def test_operation_follows_its_description(client: httpx.Client, path: str) -> None:
    op = SPEC["paths"][path]["get"]

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(req=request_for(path))
    def run(req: tuple[str, list[tuple[str, str]]]) -> None:
        url, query = req
        r = client.get(url, params=tuple(query))
        assert r.status_code < 500, (url, query, r.text[:200])
        assert str(r.status_code) in op["responses"], (url, query, r.status_code, r.text[:200])
        if r.status_code == 200 and r.headers["content-type"].startswith("application/json"):
            schema = op["responses"]["200"]["content"]["application/json"]["schema"]
            check_json(schema, r.json())

    run()


def test_description_covers_the_app(client: httpx.Client) -> None:
    served = client.get("/api/v1/openapi.json").json()
    assert served == SPEC
    # every documented GET answers 200 for one valid request
    valid = {
        "/checkpoint": "/checkpoint", "/tile/{level}/{index}": "/tile/0/000.p/41",
        "/tile/entries/{index}": "/tile/entries/000.p/41", "/api/v1/entries/{index}":
        "/api/v1/entries/3", "/api/v1/lookup/{hash}": "/api/v1/lookup/3",
        "/api/v1/proof/inclusion": "/api/v1/proof/inclusion?index=3",
        "/api/v1/proof/consistency": "/api/v1/proof/consistency?old=3",
        "/api/v1/bundles/{index}/files/{path}": "/api/v1/bundles/3/files/k2.ptx",
        "/api/v1/blobs/{digest}": None, "/api/v1/blobs": None,
        "/api/v1/openapi.json": "/api/v1/openapi.json", "/": "/", "/entry/{index}": "/entry/3",
        "/search": "/search?q=3", "/feed.atom": "/feed.atom", "/keys": "/keys",
        "/api/v1/entries/{index}/receipt": "/api/v1/entries/3/receipt",
        "/api/v1/entries/{index}/attestation": "/api/v1/entries/3/attestation",
        "/api/v1/revoked": "/api/v1/revoked?size=3",
        "/key/{key_id}": None, "/api/v1/witnesses": "/api/v1/witnesses", "/kernel/{ref}": None,
        "/api/v1/bundles/{index}/bundle.tar.gz": "/api/v1/bundles/3/bundle.tar.gz",
    }
    assert set(valid) == set(SPEC["paths"])
    digest = client.get("/api/v1/bundles/3/files/k2.ptx").headers["x-content-blake3"]
    valid["/api/v1/blobs/{digest}"] = f"/api/v1/blobs/{digest}"
    valid["/api/v1/blobs"] = f"/api/v1/blobs?d={digest}"
    valid["/key/{key_id}"] = "/key/" + client.get("/api/v1/entries/3").json()["entry"]["signer"]
    kernel = client.get("/api/v1/entries/3").json()["entry"]["kernel"]
    valid["/kernel/{ref}"] = f"/kernel/{kernel['name']}@{kernel['version']}"
    for path, url in valid.items():
        assert url is not None
        r = client.get(url)
        assert r.status_code in (200, 303), (path, r.status_code)
