"""Credentials never leave the process: error messages, printed URLs, log lines, CLI errors."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from chokaq_ops import errors
from chokaq_ops.redact import RedactingFilter, redact
from chokaq_ops.storage import Store, dialects

SECRET = "s3cr3t-Pa55"
URLS = [
    f"postgresql://alice:{SECRET}@db.example:5432/jobs",
    f"postgres://alice:{SECRET}@db.example/jobs?sslmode=require",
    f"postgresql://alice:p@ss/{SECRET}@db.example/jobs",  # unescaped '@' and '/' in the password
    f"postgresql://:{SECRET}@db.example/jobs",
    f"postgresql://db.example/jobs?user=alice&password={SECRET}",
    f"postgresql://db.example/jobs?PASSWORD={SECRET}&user=alice",
    f"postgresql://db.example/jobs?user=alice&Pwd={SECRET}",
    f"postgresql://db.example/jobs?pwd={SECRET}",
    f"postgresql://db.example/jobs?passwd={SECRET}",
    f"DRIVER={{PostgreSQL Unicode}};SERVER=db;UID=alice;PWD={SECRET};PORT=5432;",
    # ODBC braces, with `}}` an escaped brace inside the value
    f"DRIVER={{PostgreSQL Unicode}};SERVER=db;UID=alice;PWD={{{SECRET};x}}}}}};PORT=5432;",
    f"Server=db;User Id=alice;Password={SECRET};",
    f"mssql://alice:{SECRET}@db/jobs",
]


@pytest.mark.parametrize("url", URLS)
def test_every_credential_form_is_masked(url):
    masked = redact(f"cannot connect to {url}: timeout")
    assert SECRET not in masked and "***" in masked
    assert "db" in masked and "timeout" in masked  # what an operator needs to tell which database


def test_text_without_credentials_is_unchanged():
    for text in ("sqlite:///./chokaq.db", "postgresql://alice@db/jobs", "user@example.com wrote", "a=b;c=d"):
        assert redact(text) == text


@pytest.mark.parametrize("url", [u for u in URLS if u.startswith("postgres")])
def test_errors_and_printed_urls_never_carry_the_password(url):
    dialect = dialects.from_url(url)
    assert SECRET not in dialect.redacted_url()
    assert SECRET not in str(errors.StorageError(f"failed on {url}"))
    assert SECRET not in str(errors.ConfigError(f"bad {url!r}"))


def test_an_unsupported_url_is_reported_without_its_password():
    with pytest.raises(errors.ConfigError) as caught:
        dialects.from_url(f"mysql://root:{SECRET}@db/jobs")
    assert SECRET not in str(caught.value) and "mysql://root:***@db/jobs" in str(caught.value)


def test_log_lines_and_their_tracebacks_are_masked():
    record = logging.LogRecord("chokaq", logging.ERROR, __file__, 1, "cannot reach %s", (URLS[0],), None)
    try:
        raise RuntimeError(f"driver said: {URLS[4]}")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    assert RedactingFilter().filter(record)
    text = logging.Formatter().format(record)
    assert SECRET not in text and "driver said" in text and "cannot reach" in text


def test_the_cli_never_prints_the_password_of_an_unreachable_database(tmp_path):
    url = f"postgresql://alice:{SECRET}@127.0.0.1:1/jobs?connect_timeout=1"
    chokaq = str(Path(sys.executable).with_name("chokaq"))
    env = {**os.environ, "CHOKAQ_STORAGE__MAX_TRANSIENT_RETRIES": "0"}
    out = subprocess.run(
        [chokaq, "--log-level", "debug", "migrate", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode != 0
    assert SECRET not in out.stdout + out.stderr and "***" in out.stderr, out.stderr


def test_a_new_sqlite_database_and_its_wal_files_are_private(tmp_path):
    path = tmp_path / "sub" / "private.db"
    with Store(f"sqlite:///{path}", pool_size=1) as store:
        store.run("db_now", write=False)
        from chokaq_ops.storage.migrate import migrate

        migrate(store)  # writes: the -wal and -shm files exist while the store is open
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert all(f.exists() for f in files), files
        modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}
    assert set(modes.values()) == {0o600}, {k: oct(v) for k, v in modes.items()}


def test_registered_secrets_are_masked_wherever_they_appear():
    """Alert receivers' URLs and secrets (docs/alerts.md) are masked by value once a process read them."""
    from chokaq_ops.redact import register_secret

    url = "https://hooks.slack.com/services/T1/B2/registered-token-xyz"
    register_secret(url)
    register_secret("whsec-registered-0123456789")
    register_secret("short")  # too short to mask safely: ignored
    text = redact(f"POST {url} failed; signed with whsec-registered-0123456789; a short word stays")
    assert "registered-token-xyz" not in text and "whsec-registered" not in text
    assert "short word" in text and text.count("***") == 2
