"""The Deck: the web console, served at Deck.RoutePrefix (default /deck; `/` redirects there).

The console is static files (vanilla ES modules, one stylesheet, no build step, no third-party origin)
that call the public REST API with the operator's bearer token, so every action it offers is authorized,
validated and audited exactly like a curl call. This module only serves those files, with a strict
Content-Security-Policy; it reads no data and needs no token.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from flask import Blueprint, Flask, Response, abort, redirect

from chokaq_api.routes import PREFIX, open_console_route
from chokaq_ops.settings import DeckSettings

STATIC = resources.files(__package__) / "static"
TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".html": "text/html"}

# No inline script or style, nothing from another origin, never framed: data from the database cannot
# become code even if some rendering path forgot to treat it as text.
CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


def asset_names() -> frozenset[str]:
    """Every file the console may serve (relative paths); nothing else under the prefix exists."""
    names: set[str] = set()

    def walk(folder: Any, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.rsplit(".", 1)[-1] in ("js", "css", "svg"):
                names.add(prefix + entry.name)

    walk(STATIC, "")
    return frozenset(names)


def index_page(settings: DeckSettings, api_prefix: str) -> bytes:
    """index.html with the few settings the console needs, as attributes (escaped) on <html>."""
    values = {
        "data-api": api_prefix,
        "data-lag-warning": f"{settings.queue_lag_warning_threshold:g}",
        "data-lag-critical": f"{settings.queue_lag_critical_threshold:g}",
    }
    attrs = " ".join(f'{k}="{html.escape(v, quote=True)}"' for k, v in values.items())
    text = (STATIC / "index.html").read_text(encoding="utf-8")
    return text.replace('<html lang="en">', f'<html lang="en" {attrs}>', 1).encode()


def _secured(body: bytes, mimetype: str) -> Response:
    response = Response(body, mimetype=mimetype)
    response.headers.update(HEADERS)
    return response


def init_app(app: Flask, settings: DeckSettings) -> None:
    """Serve the console at settings.route_prefix and redirect `/` there (when enabled)."""
    if not settings.enabled:
        return
    prefix = settings.route_prefix
    page = index_page(settings, PREFIX)
    names = asset_names()
    blp = Blueprint("deck", __name__)

    def root() -> Any:
        return redirect(f"{prefix}/", code=302)

    def index() -> Any:
        return _secured(page, "text/html")

    def asset(name: str) -> Any:
        if name not in names:
            abort(404)
        body = (STATIC / name).read_bytes()
        return _secured(body, TYPES["." + name.rsplit(".", 1)[-1]])

    routes = (
        ("/", "root", root),
        (prefix, "bare", root),
        (f"{prefix}/", "index", index),
        (f"{prefix}/<path:name>", "asset", asset),
    )
    for rule, endpoint, view in routes:
        blp.add_url_rule(rule, endpoint, view, methods=["GET"])
        open_console_route("GET", rule)
    app.register_blueprint(blp)
