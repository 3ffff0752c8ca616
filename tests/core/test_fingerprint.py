"""Failure fingerprints: grouping of dead-lettered failures (chokaq_ops.fingerprint)."""

from __future__ import annotations

import hashlib
import json
import re
import traceback

import pytest

from chokaq_ops.fingerprint import (
    EMPTY_TEMPLATE,
    Fingerprint,
    add_normalizer,
    fingerprint_exception,
    fingerprint_text,
    normalize_message,
    remove_normalizer,
)

# A realistic traceback: worker frame (ours), the application handler, then library and stdlib frames.
MAIL_TRACEBACK = """\
Traceback (most recent call last):
  File "/srv/app/venv/lib/python3.11/site-packages/chokaq_ops/engine/worker.py", line 212, in _execute
    handler(ctx, payload)
  File "{root}/jobs/mail.py", line {line}, in {func}
    smtp.send_message(msg)
  File "/usr/lib/python3.11/smtplib.py", line 986, in send_message
    return self.sendmail(from_addr, to_addrs, flatmsg, mail_options,
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/srv/app/venv/lib/python3.11/site-packages/mailer/transport.py", line 77, in sendmail
    raise {exc_type}(msg)
{exc_type}: {message}
"""


def mail_tb(
    message: str = "Connection to 10.0.0.7:25 closed after 30s",
    *,
    exc_type: str = "smtplib.SMTPServerDisconnected",
    root: str = "/srv/app/releases/2026-11-30",
    line: int = 42,
    func: str = "send",
) -> str:
    return MAIL_TRACEBACK.format(root=root, line=line, func=func, exc_type=exc_type, message=message)


# --- grouping of tracebacks ---------------------------------------------------------------------------


def test_variable_parts_of_the_message_give_one_fingerprint():
    first = fingerprint_text(
        mail_tb(
            "job 550e8400-e29b-41d4-a716-446655440000 for alice@example.com: template 'welcome' "
            "failed at 2026-11-30T10:00:00Z after 3 tries (id usr_8f3kd92jd, obj 0x7f3a2b1c)"
        )
    )
    second = fingerprint_text(
        mail_tb(
            "job 123e4567-e89b-12d3-a456-426614174000 for bob.smith+x@corp.io: template 'reset' "
            "failed at 2026-12-01T23:59:59.123+01:00 after 12 tries (id usr_k2j3h4g5f6, obj 0x55aa01)"
        )
    )
    assert first == second
    assert first.template == (
        "job <uuid> for <email>: template '<str>' failed at <ts> after <n> tries (id usr_<id>, obj <hex>)"
    )


def test_fingerprint_fields_and_id_digest():
    fp = fingerprint_text(mail_tb())
    assert fp.exception_type == "smtplib.SMTPServerDisconnected"
    assert fp.template == "Connection to <ip>:<n> closed after <n>"
    assert fp.frame == "jobs/mail.py:send"
    expected = hashlib.sha1(f"{fp.exception_type}|{fp.template}|{fp.frame}".encode()).hexdigest()[:16]
    assert fp.id == expected
    assert len(fp.id) == 16


def test_different_exception_type_gives_two_fingerprints():
    disconnected = fingerprint_text(mail_tb(exc_type="smtplib.SMTPServerDisconnected"))
    refused = fingerprint_text(mail_tb(exc_type="ConnectionRefusedError"))
    assert refused.exception_type == "ConnectionRefusedError"
    assert disconnected.id != refused.id


def test_different_message_template_gives_two_fingerprints():
    assert fingerprint_text(mail_tb("mailbox full")).id != fingerprint_text(mail_tb("mailbox locked")).id


def test_different_application_frame_gives_two_fingerprints():
    send = fingerprint_text(mail_tb(func="send"))
    digest = fingerprint_text(mail_tb(func="send_digest"))
    assert digest.frame == "jobs/mail.py:send_digest"
    assert send.id != digest.id


def test_line_numbers_do_not_split_a_group():
    assert fingerprint_text(mail_tb(line=42)) == fingerprint_text(mail_tb(line=57))


def test_two_deploy_directories_give_the_same_frame():
    old = fingerprint_text(mail_tb(root="/srv/app/releases/2026-11-30"))
    new = fingerprint_text(mail_tb(root="/opt/deploy/build-8812"))
    assert old.frame == new.frame == "jobs/mail.py:send"
    assert old == new


def test_library_stdlib_and_worker_frames_are_skipped_for_the_application_frame():
    # The innermost frames are site-packages and stdlib, the outermost is our own worker.
    assert fingerprint_text(mail_tb()).frame == "jobs/mail.py:send"


def test_frames_of_our_own_worker_are_not_application_frames():
    # The handler called into chokaq_ops (a source checkout, not site-packages), which raised.
    text = """\
Traceback (most recent call last):
  File "/srv/app/chokaq_ops/engine/worker.py", line 212, in _execute
    handler(ctx, payload)
  File "/srv/app/jobs/report.py", line 18, in build
    ctx.heartbeat()
  File "/srv/app/chokaq_ops/engine/context.py", line 40, in heartbeat
    raise LeaseLost(self.job_id)
chokaq_ops.errors.LeaseLost: 01JD4ZQ8V3K5X7M9P2R4T6W8Y0
"""
    fp = fingerprint_text(text)
    assert fp.frame == "jobs/report.py:build"
    assert fp.template == "<id>"


def test_frozen_and_string_frames_are_not_application_frames():
    text = """\
Traceback (most recent call last):
  File "/app/jobs/loader.py", line 9, in load_plugin
    importlib.import_module(name)
  File "<frozen importlib._bootstrap>", line 1204, in _gcd_import
  File "<string>", line 1, in <module>
ModuleNotFoundError: No module named 'plugins.v2'
"""
    fp = fingerprint_text(text)
    assert fp.frame == "jobs/loader.py:load_plugin"
    assert fp.template == "No module named '<str>'"


def test_without_application_frame_the_innermost_frame_is_used():
    text = """\
Traceback (most recent call last):
  File "/srv/venv/lib/python3.11/site-packages/chokaq_ops/engine/worker.py", line 88, in _execute
    json.loads(raw)
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""
    assert fingerprint_text(text).frame == "json/decoder.py:decode"


def test_site_packages_fallback_frame_is_relative_to_site_packages():
    text = """\
Traceback (most recent call last):
  File "/home/u/.venv/lib/python3.12/site-packages/botocore/retries/standard.py", line 5, in call
    raise err
botocore.exceptions.ClientError: throttled
"""
    assert fingerprint_text(text).frame == "botocore/retries/standard.py:call"


def test_chained_exceptions_use_the_last_block():
    text = """\
Traceback (most recent call last):
  File "/app/jobs/billing.py", line 10, in fetch_invoice
    return cache[key]
           ~~~~~^^^^^
KeyError: 'inv-42'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/jobs/billing.py", line 14, in fetch_invoice
    return api.get(key)
  File "/app/clients/api.py", line 30, in get
    raise ApiError(status)
clients.api.ApiError: HTTP 503 from billing

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/jobs/billing.py", line 40, in charge
    invoice = fetch_invoice(key)
jobs.billing.ChargeFailed: could not charge invoice 42
"""
    fp = fingerprint_text(text)
    assert fp.exception_type == "jobs.billing.ChargeFailed"
    assert fp.template == "could not charge invoice <n>"
    assert fp.frame == "jobs/billing.py:charge"


def test_unraised_exception_with_a_raised_cause_has_no_frames_of_its_own():
    # format_exception prints a never-raised exception without a "Traceback" header; the frames above
    # the separator belong to the cause and must not be borrowed.
    text = """\
Traceback (most recent call last):
  File "/app/jobs/billing.py", line 14, in fetch_invoice
    return api.get(key)
ConnectionError: reset by peer

The above exception was the direct cause of the following exception:

jobs.billing.ChargeFailed: could not charge
"""
    fp = fingerprint_text(text)
    assert (fp.exception_type, fp.template, fp.frame) == (
        "jobs.billing.ChargeFailed",
        "could not charge",
        None,
    )


def test_message_prefix_before_the_traceback_is_ignored():
    text = (
        "Fatal: payload is not valid JSON\n"
        "Traceback (most recent call last):\n"
        '  File "/app/jobs/import.py", line 3, in run\n'
        "    data = json.loads(raw)\n"
        "ValueError: bad payload\n"
    )
    fp = fingerprint_text(text)
    assert (fp.exception_type, fp.template, fp.frame) == ("ValueError", "bad payload", "jobs/import.py:run")


def test_windows_text_with_crlf_and_backslash_paths():
    text = (
        "Traceback (most recent call last):\r\n"
        '  File "C:\\deploy\\v7\\jobs\\mail.py", line 42, in send\r\n'
        "    smtp.send()\r\n"
        '  File "C:\\Python311\\Lib\\smtplib.py", line 986, in send_message\r\n'
        "    return self.sendmail()\r\n"
        "smtplib.SMTPServerDisconnected: Connection unexpectedly closed\r\n"
    )
    fp = fingerprint_text(text)
    assert fp.frame == "jobs/mail.py:send"
    assert fp.exception_type == "smtplib.SMTPServerDisconnected"


def test_traceback_cut_before_its_exception_line():
    text = 'Traceback (most recent call last):\n  File "/app/jobs/mail.py", line 42, in send\n    smtp.'
    fp = fingerprint_text(text)
    assert (fp.exception_type, fp.template, fp.frame) == (
        "Error",
        "(truncated traceback)",
        "jobs/mail.py:send",
    )


# --- one-line messages ------------------------------------------------------------------------------


def test_zombie_messages_group_together():
    first = fingerprint_text(
        "Zombie detected: heartbeat expired; "
        "last heartbeat 2026-11-30T10:00:00Z, worker w-1a2b, runtime 612.5s"
    )
    second = fingerprint_text(
        "Zombie detected: heartbeat expired; "
        "last heartbeat 2026-12-02T08:15:30Z, worker w-9f8e, runtime 1204s"
    )
    assert first == second
    assert first.exception_type == "Zombie detected"
    assert first.template == "heartbeat expired; last heartbeat <ts>, worker <id>, runtime <n>"
    assert first.frame is None


def test_timeouts_group_together():
    first = fingerprint_text("Timeout: execution exceeded 30s")
    assert first == fingerprint_text("Timeout: execution exceeded 45s")
    assert (first.exception_type, first.template) == ("Timeout", "execution exceeded <n>")


def test_fatal_json_errors_with_different_positions_group_together():
    first = fingerprint_text(
        "Fatal: payload is not valid JSON: Expecting ',' delimiter: line 3 column 3 (char 52)"
    )
    second = fingerprint_text(
        "Fatal: payload is not valid JSON: Expecting ',' delimiter: line 1 column 80 (char 79)"
    )
    assert first == second
    assert first.exception_type == "Fatal"
    assert (
        first.template
        == "payload is not valid JSON: Expecting '<str>' delimiter: line <n> column <n> (char <n>)"
    )


@pytest.mark.parametrize(
    ("text", "exception_type", "template"),
    [
        ("Unknown job type 'email.v9'", "Error", "Unknown job type '<str>'"),
        ("Cancelled by admin: alice", "Cancelled by admin", "alice"),
        ("HeartbeatFailure", "HeartbeatFailure", ""),
        (
            "requests.exceptions.ReadTimeout: read timed out",
            "requests.exceptions.ReadTimeout",
            "read timed out",
        ),
        ("http://billing.local/v1 is down", "Error", "http://billing.local/v1 is down"),
        (
            "Retry lifetime expired. CreatedAtUtc=2026-11-30T10:00:00Z",
            "Error",
            "Retry lifetime expired. CreatedAtUtc=<ts>",
        ),
    ],
)
def test_one_line_exception_type(text, exception_type, template):
    fp = fingerprint_text(text)
    assert (fp.exception_type, fp.template, fp.frame) == (exception_type, template, None)


@pytest.mark.parametrize("text", [None, "", "   \n\t "])
def test_empty_error_details_get_a_placeholder(text):
    fp = fingerprint_text(text)
    assert (fp.exception_type, fp.template, fp.frame) == ("Error", EMPTY_TEMPLATE, None)
    assert EMPTY_TEMPLATE == "(empty error details)"


# --- live exceptions ---------------------------------------------------------------------------------


def _parse_payload(raw: str) -> object:
    return json.loads(raw)  # raises inside the stdlib json package


def _raise_chained() -> None:
    try:
        _parse_payload('{"a": 1 "b": 2}')
    except ValueError as exc:
        raise RuntimeError(f"payload of job {id(exc)} rejected") from exc


def test_fingerprint_exception_equals_fingerprint_text_of_the_formatted_traceback():
    with pytest.raises(json.JSONDecodeError) as info:
        _parse_payload('{"a": 1 "b": 2}')
    exc = info.value
    fp = fingerprint_exception(exc)
    assert fp == fingerprint_text("".join(traceback.format_exception(exc)))
    assert fp.exception_type == "json.decoder.JSONDecodeError"
    assert fp.template == "Expecting '<str>' delimiter: line <n> column <n> (char <n>)"
    assert fp.frame == "core/test_fingerprint.py:_parse_payload"


def test_fingerprint_exception_of_a_chained_exception():
    with pytest.raises(RuntimeError) as info:
        _raise_chained()
    fp = fingerprint_exception(info.value)
    assert fp == fingerprint_text("".join(traceback.format_exception(info.value)))
    assert (fp.exception_type, fp.template) == ("RuntimeError", "payload of job <id> rejected")
    assert fp.frame == "core/test_fingerprint.py:_raise_chained"


def _raised(exc: Exception) -> Exception:
    try:
        raise exc
    except Exception as caught:
        return caught


def test_fingerprint_exception_of_an_exception_group_uses_the_group():
    # The sub-exceptions were raised too, so the text holds nested "Traceback" headers behind a gutter.
    def run_all() -> None:
        raise ExceptionGroup("2 jobs failed", [_raised(ValueError("a")), _raised(KeyError("b"))])

    with pytest.raises(ExceptionGroup) as info:
        run_all()
    fp = fingerprint_exception(info.value)
    assert "    | Traceback (most recent call last):" in "".join(traceback.format_exception(info.value))
    assert fp.exception_type == "ExceptionGroup"
    assert fp.template == "<n> jobs failed (<n> sub-exceptions)"
    assert fp.frame == "core/test_fingerprint.py:run_all"


def test_fingerprint_exception_of_an_exception_never_raised():
    fp = fingerprint_exception(ValueError("bad value 7"))
    assert (fp.exception_type, fp.template, fp.frame) == ("ValueError", "bad value <n>", None)


def test_fingerprint_is_frozen():
    fp = fingerprint_text("Timeout: x")
    assert isinstance(fp, Fingerprint)
    with pytest.raises(AttributeError):
        fp.template = "other"  # type: ignore[misc]


# --- normalize_message -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("user 550e8400-e29b-41d4-a716-446655440000 missing", "user <uuid> missing"),
        ("UUID 550E8400-E29B-41D4-A716-446655440000", "UUID <uuid>"),
        ("mail to bob.smith+tag@mail.example.com bounced", "mail to <email> bounced"),
        (
            "GET https://api.example.com/users/12345/orders/a1b2c3d4e5f6?token=abc#top failed.",
            "GET https://api.example.com/users/<n>/orders/<id> failed.",
        ),
        ("POST http://user:secret@10.1.2.3:8080/hook", "POST http://<ip>:<n>/hook"),
        ("object at 0x7f3a2b1c", "object at <hex>"),
        ("sha 9f86d081884c7d659a2feaa0c55ad015 mismatch", "sha <id> mismatch"),
        ("deadbeefcafe is a word-like hex without digits", "deadbeefcafe is a word-like hex without digits"),
        ("ulid 01ARZ3NDEKTSV4RRFFQ69G5FAV", "ulid <id>"),
        ("token eyJhbGciOiJIUzI1NiJ9 expired", "token <id> expired"),
        ("customer cus_J2k3l4m5N6 not found", "customer cus_<id> not found"),
        ("at 2026-11-30T10:00:00Z", "at <ts>"),
        ("at 2026-11-30 10:00:00.123456+00:00", "at <ts>"),
        ("on 2026-11-30 at 10:15", "on <ts> at <ts>"),
        ("host 192.168.1.20 and ::1 and fe80::1ff:fe23:4567:890a", "host <ip> and <ip> and <ip>"),
        ("key 'user_id' missing", "key '<str>' missing"),
        ('field "email" required', 'field "<str>" required'),
        ("can't open user's file", "can't open user's file"),
        ("scope a::b and std::vector", "scope a::b and std::vector"),  # no digit: not an IPv6 address
        ("retry 3 of 5", "retry <n> of <n>"),
        ("delta -5 ratio 0.75 big 1.5e-3", "delta <n> ratio <n> big <n>"),
        ("ran 30s using 512MB (95%)", "ran <n> using <n> (<n>)"),
        ("order 42 and order 12345678", "order <n> and order <id>"),
        ("worker-3 and worker_17 failed", "worker-<n> and worker_<n> failed"),
        ("worker w-1a2b lost", "worker <id> lost"),
        ("python v1.2.3 utf8", "python v1.2.3 utf8"),
        ("  lots \n of\t\twhitespace  ", "lots of whitespace"),
        ("", ""),
    ],
)
def test_normalize_message(message, expected):
    assert normalize_message(message) == expected


def test_normalize_message_truncates_to_300_characters():
    assert normalize_message("a" * 1000) == "a" * 300
    assert normalize_message("word " * 200) == ("word " * 60).rstrip()  # no trailing space after the cut
    assert normalize_message("7;" * 500) == "<n>;" * 75  # placeholders are longer than the numbers


@pytest.mark.parametrize(
    "message",
    [
        "job 550e8400-e29b-41d4-a716-446655440000 at 2026-11-30T10:00:00Z for a@b.io",
        "POST http://user:secret@10.1.2.3:8080/hook?x=1",
        "worker w-1a2b: 'x' 0x1f 12 abc123def456",
    ],
)
def test_normalize_message_is_idempotent(message):
    once = normalize_message(message)
    assert once != message
    assert normalize_message(once) == once


# The two templates of a 503 outage: the same request-id field, hex with letters or all digits.
OUTAGE = (
    "requests.exceptions.HTTPError: {code} Server Error: {phrase} for url: "
    "https://pay.example.com/v1/charge (request id {rid})"
)


def _outage(code: int, phrase: str, rid: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/billing.py", line 12, in charge\n'
        "    resp.raise_for_status()\n" + OUTAGE.format(code=code, phrase=phrase, rid=rid) + "\n"
    )


def test_an_outage_is_one_group_whatever_the_request_id_alphabet():
    hex_id = fingerprint_text(_outage(503, "Service Unavailable", "3f9a2c71"))
    digit_id = fingerprint_text(_outage(503, "Service Unavailable", "83920175"))
    assert hex_id.id == digit_id.id
    assert hex_id.template.endswith("(request id <id>)")


def test_status_codes_stay_two_groups():
    five_hundred = fingerprint_text(_outage(500, "Internal Server Error", "83920175"))
    five_oh_three = fingerprint_text(_outage(503, "Service Unavailable", "83920175"))
    assert five_hundred.id != five_oh_three.id
    assert "503 Server Error" in five_oh_three.template


@pytest.mark.parametrize(
    ("message", "template"),
    [
        ("upstream returned 503 for request 1234567890", "upstream returned 503 for request <id>"),
        ("HTTP 502 from gateway", "HTTP 502 from gateway"),
        ("status=500, status code: 429", "status=500, status code: 429"),
        ("got 404 Not Found", "got 404 Not Found"),
        ("took 500ms for 503 rows", "took <n> for <n> rows"),  # a count, not a status
    ],
)
def test_status_code_rules(message, template):
    assert normalize_message(message) == template


def test_custom_normalisers_run_first_and_can_be_removed():
    def tenants(text: str) -> str:
        return re.sub(r"tenant [a-z]+", "tenant <tenant>", text)

    before = normalize_message("quota exceeded for tenant acme")
    add_normalizer(tenants)
    try:
        assert normalize_message("quota exceeded for tenant acme") == "quota exceeded for tenant <tenant>"
        assert normalize_message("quota exceeded for tenant globex") == "quota exceeded for tenant <tenant>"
    finally:
        remove_normalizer(tenants)
    assert normalize_message("quota exceeded for tenant acme") == before
    with pytest.raises(TypeError):
        add_normalizer("not a function")  # type: ignore[arg-type]
