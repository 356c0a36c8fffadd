"""Render the project's jinja2 templates (``templates/``) from typed parameter objects.

The environment is strict: an undefined variable is an error, never an empty string.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import jinja2

from libraries.testbed.errors import RenderError

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"


@functools.cache
def _environment() -> jinja2.Environment:
    """Build the jinja2 environment once, on first use (never at import time)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - configs, not HTML
    )


def template_context(params: Any) -> dict[str, Any]:
    """Template variables of ``params``: each dataclass field by name, plus ``params`` itself.

    Fields are taken shallowly, so nested parameter objects keep their properties and
    methods (``instance.pid_path``); a mapping is used as it is.
    """
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        context = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    elif isinstance(params, dict):
        context = dict(params)
    else:
        raise RenderError(
            f"render parameters: expected a dataclass instance or a dict, "
            f"got {type(params).__name__}"
        )
    context["params"] = params
    return context


def render(template_name: str, params: Any) -> str:
    """Render ``templates/<template_name>`` with the fields of ``params``; return the text.

    Raises RenderError naming the template and the problem (missing template, syntax
    error, undefined variable, error raised by a parameter property).
    """
    try:
        template = _environment().get_template(template_name)
    except jinja2.TemplateNotFound:
        raise RenderError(
            f"template {template_name!r}: not found under {TEMPLATES_DIR}"
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(
            f"template {template_name!r}: syntax error at line {exc.lineno}: {exc.message}"
        ) from exc
    context = template_context(params)
    try:
        return template.render(context)
    except RenderError as exc:
        raise RenderError(f"template {template_name!r}: {exc}") from exc
    except (jinja2.TemplateError, TypeError, ValueError, AttributeError) as exc:
        raise RenderError(
            f"template {template_name!r}: cannot render with {type(params).__name__}: {exc}"
        ) from exc
