"""The whole bundle of an entry as one reproducible ``.tar.gz`` (issue 34):
``GET /api/v1/bundles/{index}/bundle.tar.gz``.

The archive is a function of the entry alone: the manifest's files in its (sorted) order under
one directory ``entry-{index}/``, every member a regular file with mode 0644, mtime 0, owner and
group 0 named ``root``, ustar format; gzip with mtime 0, no file name, level 9. So the same entry
gives the same bytes on every mirror, and the SHA-256 the entry page shows can be checked by
anyone who downloads it (``sha256sum``). A file whose content this server does not hold makes the
archive unavailable (404), never a partial archive.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections import OrderedDict

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ledger.core.bundle import parse_manifest
from ledger.core.canonical import loads_canonical
from ledger.core.encoding import hex_encode
from ledger.http.state import Served, served, tree_index

DIGEST_CACHE = 4096  # entries whose archive digest is remembered (64-hex strings)
# (index, leaf hash) -> sha256: the archive is a function of the entry alone
_digests: OrderedDict[tuple[int, bytes], str] = OrderedDict()


def archive_name(index: int) -> str:
    return f"entry-{index}.tar.gz"


def bundle_archive(s: Served, index: int) -> bytes:
    """The reproducible ``.tar.gz`` of bundle entry ``index`` (module docstring); HTTP 404 when
    the entry is no bundle or a file's content is not stored here."""
    entry = loads_canonical(s.store.entry(index))
    if not isinstance(entry, dict) or entry.get("type") != "bundle":
        raise HTTPException(404, f"entry {index} is not a bundle entry")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel, digest in parse_manifest(str(entry.get("manifest", "")).encode("utf-8")):
            data = s.store.blob(digest, index)
            if data is None:
                raise HTTPException(404, f"{rel}: file content is not stored here")
            info = tarfile.TarInfo(f"entry-{index}/{rel}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def archive_digest(s: Served, index: int) -> str:
    """The SHA-256 (hex) of the entry's archive, remembered per entry (entries never change);
    "" when there is no archive (not a bundle, content not stored)."""
    key = (index, s.store.leaf_hash(index))
    hit = _digests.get(key)
    if hit is None:
        try:
            hit = hex_encode(hashlib.sha256(bundle_archive(s, index)).digest())
        except HTTPException:
            return ""
        _digests[key] = hit
        while len(_digests) > DIGEST_CACHE:
            _digests.popitem(last=False)
    return hit


async def api_bundle_archive(request: Request) -> Response:
    s = served(request)
    index = tree_index(s.view(), request.path_params["index"])
    data = bundle_archive(s, index)
    return Response(data, media_type="application/gzip", headers={
        "Content-Disposition": f'attachment; filename="{archive_name(index)}"',
        "Cache-Control": "public, max-age=31536000, immutable",
        "X-Content-SHA256": hex_encode(hashlib.sha256(data).digest()),
    })
