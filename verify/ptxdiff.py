"""Where two PTX texts first differ, as one line of a check's detail (``rebuild.ptx`` for nvcc
and Triton builds alike: ``verify.rebuild``, ``verify.rebuild_triton``)."""

from __future__ import annotations


def first_difference(bundled: bytes, rebuilt: bytes) -> str:
    """Where the bundle's PTX and the rebuilt one first differ, as one line of detail (the
    bundle's, not "the sealed": a bundle being checked may never have been sealed)."""
    a, b = bundled.split(b"\n"), rebuilt.split(b"\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            xs = x.decode("utf-8", "replace").strip()[:120]
            ys = y.decode("utf-8", "replace").strip()[:120]
            hint = ""
            if b"compilation tools" in x or b"Compiler Build ID" in x:
                hint = " (the bundle's PTX was written by a different nvcc)"
            return f"first difference at line {i + 1}: bundle's {xs!r}, rebuilt {ys!r}{hint}"
    return f"one is a prefix of the other: bundle's {len(bundled)} bytes, rebuilt {len(rebuilt)}"
