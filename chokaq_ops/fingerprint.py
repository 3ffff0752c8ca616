"""Failure fingerprints: group dead-lettered jobs that failed for the same reason.

A fingerprint is exception type + normalised message template + innermost application frame. The worker
stores ``Fingerprint.id`` when it dead-letters a job; the analysis toolkit groups DLQ rows by it. Both call
the same functions here on the same stored text, so the two sides always agree. Stdlib only.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "Fingerprint",
    "add_normalizer",
    "fingerprint_exception",
    "fingerprint_text",
    "normalize_message",
    "remove_normalizer",
]

EMPTY_TEMPLATE = "(empty error details)"
TEMPLATE_LIMIT = 300
# Cap the raw message before normalising: a huge message costs regex time and only its start can reach
# the 300-character template anyway.
_RAW_LIMIT = 4096


@dataclass(frozen=True)
class Fingerprint:
    id: str
    exception_type: str
    template: str
    frame: str | None


# --- message normalisation -------------------------------------------------------------------------------
# All rules live in ONE alternation applied in a single left-to-right pass, so no rule ever re-reads
# another rule's output (a placeholder cannot be half-replaced, and normalising twice changes nothing).
# The order of the alternatives decides which rule wins when several match at the same position:
#   url    first: a URL holds hosts, ids and numbers; it is rebuilt as a whole (path ids normalised).
#   email  before ids/numbers: "bob42@x.io" must not become "<id>@x.io".
#   uuid   before hex: a UUID's groups are hex runs and would become "<hex>-<hex>-...".
#   ts     before ip/number: "2026-11-30T10:00:00Z" would otherwise be shredded into "<n>-<n>-...".
#   ip     before number: "10.0.0.1" would become "<n>.<n>".
#   hex    before id: "0x7f3a..." (an address or literal) is reported as <hex>.
#   worker before id: our own zombie text names the worker ("worker w-1a2b"); such short host-derived
#          ids slip through the generic rules, and one zombie group per worker would be useless.
#   status before id and number: an HTTP status after a word that introduces one ("HTTP 503", "status
#          500", "returned 502") or before its reason phrase ("503 Service Unavailable") stays literal, so
#          a 500 and a 503 are two groups.
#   id     before number: any run of 8 or more letters and digits that holds a digit is an id, whatever its
#          alphabet: "usr_8f3kd92jd" -> "usr_<id>", and a hex request id is <id> whether it happens to
#          be "3f9a2c71" or "83920175" (all digits), so one outage is one group. Shorter numbers ("order
#          42", "retry 3 of 5") are counts and stay <n>.
#   n      (numbers) last among the token rules; quotes never clash (they start at a quote character).
_HEX = r"[0-9a-fA-F]"
_TOKEN_RULES = [
    ("url", r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+"),
    ("email", r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    ("uuid", rf"(?<![0-9a-zA-Z]){_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}(?![0-9a-zA-Z])"),
    (
        "ts",
        r"(?<![\w.])(?:\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
        r"|\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)(?:Z|[+-]\d{2}:?\d{2})?(?![\w:])",
    ),
    (
        "ip",
        r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}(?![\w.])"
        rf"|(?=[0-9a-fA-F:]*\d)(?:(?:{_HEX}{{1,4}}:){{7}}{_HEX}{{1,4}}"
        rf"|(?:(?:{_HEX}{{1,4}}:){{1,7}}|:):(?:{_HEX}{{1,4}}(?::{_HEX}{{1,4}}){{0,6}})?)(?![\w.:]))",
    ),
    ("hex", rf"(?<![0-9a-zA-Z])0[xX]{_HEX}+(?![0-9a-zA-Z])"),
    ("worker", r"(?P<label>(?i:\bworker(?:[ _-]?id)?)[ =:#]+)(?=[\w.-]*\d)[\w.-]*\w"),
    (
        "status",
        r"(?i:\b(?:https?(?:/\d(?:\.\d)?)?|status(?:[ _]code)?|code|returned|responded|response|error)"
        r"[ \t]*[:=]?[ \t]*)[1-5]\d\d(?![\w.])"
        r"|(?<![\w.])[1-5]\d\d(?= (?:Server Error|Client Error|Service Unavailable|Internal Server Error"
        r"|Bad Gateway|Gateway Time-?out|Bad Request|Unauthorized|Forbidden|Not Found|Conflict"
        r"|Too Many Requests)\b)",
    ),
    ("id", r"(?<![0-9a-zA-Z])(?=[A-Za-z]*\d)[A-Za-z0-9]{8,}={0,2}(?![0-9a-zA-Z])"),
    # A unit of up to 3 letters belongs to the number: "30s", "512MB", "1.5GiB".
    (
        "n",
        r"(?<![A-Za-z0-9.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?:[A-Za-z%]{1,3})?(?![A-Za-z0-9]|\.\d)",
    ),
    # An opening quote must not follow a letter, so apostrophes ("can't", "user's") are not quotes.
    ("squote", r"(?<![A-Za-z0-9])'(?:[^'\\\n]|\\.)*'(?![A-Za-z0-9])"),
    ("dquote", r'(?<![A-Za-z0-9])"(?:[^"\\\n]|\\.)*"(?![A-Za-z0-9])'),
]
_TOKENS = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _TOKEN_RULES))
_URL_TRAILER = re.compile(r"[.,;:!?)\]}]+$")


def _normalize_url(url: str) -> str:
    # Keep the shape scheme://host/path; drop credentials, query and fragment (they carry per-job values).
    trailer = _URL_TRAILER.search(url)
    tail = trailer.group() if trailer else ""
    url = url[: len(url) - len(tail)]
    scheme, _, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    host = netloc.rpartition("@")[2]
    host = _TOKENS.sub(_replace, host) if re.fullmatch(r"[\d.:\[\]]+", host) else host.lower()
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    segments = [_TOKENS.sub(_replace, segment) for segment in path.split("/")]
    return f"{scheme.lower()}://{host}{slash}{'/'.join(segments)}{tail}"


def _replace(match: re.Match[str]) -> str:
    kind = match.lastgroup or ""
    if kind == "url":
        return _normalize_url(match.group())
    if kind == "worker":
        return match["label"] + "<id>"
    if kind == "status":  # kept as written: the status is what tells the failures apart
        return match.group()
    if kind in ("squote", "dquote"):  # keep the quote character: 'x' -> '<str>', "x" -> "<str>"
        return f"{match.group()[0]}<str>{match.group()[0]}"
    return f"<{kind}>"  # the group names are the placeholders: <email>, <uuid>, <ts>, ..., <n>


_NORMALIZERS: list[Callable[[str], str]] = []


def add_normalizer(fn: Callable[[str], str]) -> Callable[[str], str]:
    """Register a custom message normaliser (usable as a decorator), run before the built-in rules on
    every message: e.g. replace tenant names with ``<tenant>`` so one failure across tenants is one group.

    It must be pure and deterministic, and registered the same way wherever fingerprints are computed:
    in the worker processes (which store the fingerprint) and in the notebook that recomputes them
    (``add_fingerprints(recompute=True)``), typically by importing one module of yours in both. Adding
    one changes the fingerprints of new failures only; stored ones stay as they were."""
    if not callable(fn):
        raise TypeError("a normaliser is a function str -> str")
    _NORMALIZERS.append(fn)
    return fn


def remove_normalizer(fn: Callable[[str], str]) -> None:
    """Unregister a normaliser added with `add_normalizer`."""
    _NORMALIZERS.remove(fn)


def normalize_message(message: str) -> str:
    """Replace the variable parts of an error message with placeholders: the custom normalisers of
    `add_normalizer` first, then the built-in rules above."""
    text = message[:_RAW_LIMIT]
    for fn in _NORMALIZERS:
        text = fn(text)
    text = " ".join(text.split())
    text = _TOKENS.sub(_replace, text)
    return text[:TEMPLATE_LIMIT].rstrip()


# --- traceback parsing ------------------------------------------------------------------------------------
# format_exception prints the chain oldest first, so the block after the last separator is the exception
# that was actually raised. Separators inside an exception group carry a "|" gutter and are not matched.
_CHAIN_SEPARATOR = re.compile(
    r"^(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)[ \t]*$",
    re.MULTILINE,
)
_HEADER = re.compile(
    r"^(?P<gutter>[ |+]*?)(?:Exception Group )?Traceback \(most recent call last\):[ \t]*$", re.MULTILINE
)
_FRAME = re.compile(r'^\s+File "(?P<path>[^"\n]+)", line \d+(?:, in (?P<func>.+?))?\s*$')
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_TITLE = re.compile(r"[A-Za-z][\w-]*(?: [A-Za-z][\w-]*){0,3}")  # "Zombie detected", "Cancelled by admin"

# Library frames say where a failure surfaced, not whose code caused it, so the innermost frame outside
# the stdlib, third-party packages and our own worker is the one that tells failures apart. The tests
# look at the path text only (never at this interpreter's sysconfig), so a fingerprint recomputed on an
# analyst's machine equals the one the worker stored.
_THIRD_PARTY = re.compile(r"/(?:site|dist)-packages/")
_STDLIB_DIR = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?/|/Lib/")
_OWN_CODE = re.compile(r"(?:^|/)chokaq_ops/")


def _is_application(path: str) -> bool:
    if path.startswith("<"):  # "<frozen importlib._bootstrap>", "<string>", "<stdin>"
        return False
    if _THIRD_PARTY.search(path) or _OWN_CODE.search(path):
        return False
    return not _STDLIB_DIR.search(path)


def _short_path(path: str) -> str:
    """Deploy-independent path for a frame.

    Third-party and stdlib files keep their path below site-packages / lib/pythonX.Y (already
    independent of where the interpreter lives). Everything else keeps its last 2 components:
    "/srv/app/releases/2026-11-30/jobs/mail.py" and "/app/jobs/mail.py" both give "jobs/mail.py".
    Limitation: a module sitting directly in a per-release directory keeps that directory's name.
    """
    if path.startswith("<"):
        return path
    for pattern in (_THIRD_PARTY, _STDLIB_DIR):
        matches = list(pattern.finditer(path))
        if matches:
            return path[matches[-1].end() :]
    return "/".join(path.rstrip("/").split("/")[-2:])


def _split_type(text: str) -> tuple[str, str]:
    """Split "Type: message"; text without a recognisable type is all message, of type "Error"."""
    text = text.strip()
    first, newline, more = text.partition("\n")  # the type is on the first line; later lines are message
    head, colon, rest = first.partition(":")
    head = head.strip()
    if rest.startswith("//"):  # "http://..." is a URL, not a type
        return "Error", text
    if _DOTTED.fullmatch(head) or (colon and _TITLE.fullmatch(head)):
        return head, (rest + newline + more).strip()
    return "Error", text


def _last_block(text: str) -> tuple[list[tuple[str, str]], str]:
    """Frames (path, function) and exception text of the raised exception.

    A block without a "Traceback" header (a one-line message, or an exception that was never raised)
    has no frames and is all exception text.
    """
    chunk = _CHAIN_SEPARATOR.split(text)[-1]
    headers = list(_HEADER.finditer(chunk))
    if not headers:
        return [], chunk
    # The raised exception is the last header with the narrowest gutter; deeper gutters are the
    # sub-exceptions of an exception group, whose body lines are prefixed "  | ".
    narrowest = min(len(h["gutter"]) for h in headers)
    header = [h for h in headers if len(h["gutter"]) == narrowest][-1]
    lines = chunk[header.end() :].split("\n")[1:]  # the header match stops before its own newline
    if header["gutter"]:
        bar = header["gutter"].replace("+", "|")
        body = []
        for line in lines:
            if not (line.startswith(bar) or line == bar.rstrip()):
                break
            body.append(line[len(bar) :])
        lines = body
    frames: list[tuple[str, str]] = []
    for index, line in enumerate(lines):
        frame = _FRAME.match(line)
        if frame:
            frames.append((frame["path"].replace("\\", "/"), frame["func"] or "?"))
        elif line.strip() and not line[:1].isspace():
            return frames, "\n".join(lines[index:])
    return frames, ""


def _pick_frame(frames: list[tuple[str, str]]) -> str | None:
    if not frames:
        return None
    path, func = next((f for f in reversed(frames) if _is_application(f[0])), frames[-1])
    return f"{_short_path(path)}:{func}"


def _make(exception_type: str, template: str, frame: str | None) -> Fingerprint:
    digest = hashlib.sha1(f"{exception_type}|{template}|{frame or ''}".encode(), usedforsecurity=False)
    return Fingerprint(digest.hexdigest()[:16], exception_type, template, frame)


def fingerprint_text(error_details: str | None) -> Fingerprint:
    """Fingerprint stored error text: a formatted traceback (possibly chained) or a one-line message."""
    if not error_details or not error_details.strip():
        return _make("Error", EMPTY_TEMPLATE, None)
    error_details = error_details.replace("\r\n", "\n")  # text stored from a Windows worker
    frames, exception_text = _last_block(error_details)
    if exception_text.strip():
        exception_type, message = _split_type(exception_text)
    else:  # the text was cut off before the exception line
        exception_type, message = "Error", "(truncated traceback)"
    return _make(exception_type, normalize_message(message), _pick_frame(frames))


def fingerprint_exception(exc: BaseException) -> Fingerprint:
    """Fingerprint a live exception. Defined through the formatted text, so it always equals
    ``fingerprint_text`` of what the worker stores for the same exception."""
    return fingerprint_text("".join(traceback.format_exception(exc)))
