"""The HTML pages' templates: Jinja2 over ``ledger/http/templates/*.html`` with automatic escaping.

Every value a handler passes is escaped when the template prints it (``autoescape=True`` for all
templates, whatever their name); no template marks anything ``|safe``. The environment is built on
the first page served, so importing this module (the CLI imports the server lazily, but still)
does not import Jinja2.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.responses import HTMLResponse

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@cache
def environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, not only *.html: nothing is ever printed raw
        undefined=jinja2.StrictUndefined,  # a misspelt name is an error in the tests, not ""
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """``name`` (a template under ``ledger/http/templates``) rendered with ``context``."""
    return HTMLResponse(environment().get_template(name).render(context), status)
