"""The HTML pages' templates: Jinja2 over ``ledger/http/templates/*.html`` with automatic escaping.

Every value a handler passes is escaped when the template prints it (``autoescape=True`` for all
templates, whatever their name); no template marks anything ``|safe`` (the ``tokens`` filter
escapes its text itself). The environment is built on
the first page served, so importing this module (the CLI imports the server lazily, but still)
does not import Jinja2.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape
from starlette.responses import HTMLResponse

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@cache
def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, not only *.html: nothing is ever printed raw
        undefined=jinja2.StrictUndefined,  # a misspelt name is an error in the tests, not ""
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tokens"] = tokens
    return env


_SPACE = re.compile(r"(\s+)")
_BREAKS = re.compile(r"[^\w\s]")  # a character after which a browser may break a line


def tokens(text: object) -> Markup:
    """Free text (a check's detail, a reason) escaped, with every word that holds a character a
    browser may break a line after (``-``, ``/``, ``.``: check ids, times, paths, versions)
    kept on one line (``<span class="nowrap">``): lines break only at spaces (issue 34)."""
    out = []
    for part in _SPACE.split(str(text)):
        word = escape(part)
        out.append(Markup('<span class="nowrap">%s</span>') % word
                   if part and not part.isspace() and _BREAKS.search(part) else word)
    return Markup("").join(out)


def render(name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """``name`` (a template under ``ledger/http/templates``) rendered with ``context``."""
    return HTMLResponse(environment().get_template(name).render(context), status)
