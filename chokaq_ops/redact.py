"""Credentials out of every text chokaq shows: error messages, log lines, URLs printed at start.

Three forms carry a secret in a database URL or connection string: the userinfo of a URL
(`scheme://user:password@host`), a `password=` / `pwd=` query or keyword parameter
(`?password=x`, `&PWD=x`, `;Pwd={x;y}`), in any letter case. Each is replaced by `***`; the user name
and host stay, because an operator needs them to tell which database failed.
"""

from __future__ import annotations

import logging
import re

MASK = "***"
# scheme://user:secret@ -- an unescaped '@' or '/' may sit inside the secret, so it runs to the last '@'
# before whitespace or a quote (masking a little too much beats showing part of a password).
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#'\"]*):[^\s'\"]*@")
# Keyword forms: password=..., pwd=..., passwd=..., with ODBC braces {...;...} or up to & ; whitespace.
_KEYWORD = re.compile(
    r"(?P<key>\b(?:password|passwd|pwd)\s*=\s*)(?P<value>\{(?:[^}]|\}\})*\}?|[^&;\s'\"]*)", re.IGNORECASE
)


# Secrets the process knows by value (alert receivers' URLs and signing secrets, docs/alerts.md): masked
# wherever they appear. Longest first, so a URL is masked whole before a secret inside it.
_SECRETS: list[str] = []
MIN_SECRET_CHARS = 8  # shorter values would mask ordinary words


def register_secret(value: str | None) -> None:
    """Mask `value` in every text `redact` cleans from now on (error messages, log lines). The list is
    replaced, never changed in place: a thread masking a line meanwhile reads a whole old or new list."""
    global _SECRETS
    if value and len(value) >= MIN_SECRET_CHARS and value not in _SECRETS:
        _SECRETS = sorted([*_SECRETS, value], key=len, reverse=True)


def redact(text: object) -> str:
    """`text` as a string with every credential field masked."""
    out = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", str(text))
    out = _KEYWORD.sub(lambda m: f"{m['key']}{MASK}", out)
    for secret in _SECRETS:
        if secret in out:
            out = out.replace(secret, MASK)
    return out


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in a record's message and its exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            # Formatted once here, masked, and cached where the formatter looks for it.
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(formatted)
            record.exc_info = None
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Mask credentials on every handler of `logger` (default: the root logger), once."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
