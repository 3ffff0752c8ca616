"""Fixtures for The Deck's browser tests: real Chromium (Debian's `chromium` package, driven by
playwright with `executable_path`; no browser is ever downloaded) against a real `chokaq serve`.

Without /usr/bin/chromium or the playwright package the tests skip with the reason, unless
CHOKAQ_REQUIRE_BROWSER=1 (CI), where they fail instead.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chokaq_ops.models import Actor
from chokaq_ops.storage import Store
from tests.support.served import REPO, Served

CHROMIUM = os.environ.get("CHOKAQ_CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("CHOKAQ_REQUIRE_BROWSER", "") not in ("", "0", "false", "no")
# Where the screenshots go: docs/deck.md's pictures are refreshed with CHOKAQ_DECK_SHOTS=docs/deck; by
# default a run leaves the work tree clean and saves them under the temp directory.
_SHOTS_TO = os.environ.get("CHOKAQ_DECK_SHOTS")
SHOTS = REPO / _SHOTS_TO if _SHOTS_TO else Path(tempfile.gettempdir()) / "chokaq-deck-shots"
TIMEOUT_MS = 15_000


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"a browser is required (CHOKAQ_REQUIRE_BROWSER) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[test]')")
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


class Console:
    """One signed-in browser tab on The Deck, recording every dialog and page error (hostile text must
    never open an alert, and no script error may pass unnoticed)."""

    def __init__(self, browser: Any, base: str, token: str) -> None:
        self.context = browser.new_context(viewport={"width": 1440, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.response = self.page.goto(base + "/")
        self.page.get_by_label("API token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.locator("#nav button").first.wait_for()

    def panel(self, name: str) -> Any:
        self.page.locator("#nav").get_by_role("button", name=name, exact=True).click()
        self.page.locator(".panel h1", has_text=name).wait_for()
        self.settled()
        return self.page

    def settled(self) -> None:
        """Every API request the view made has answered (and rendered)."""
        self.page.locator('body[data-busy="0"]').wait_for(state="attached")

    def shot(self, name: str, dialect: str, focus: Any = None, height: int | None = None) -> None:
        """Screenshots for docs/deck.md, from the SQLite run only (one set, not one per dialect);
        `height` enlarges the window for this picture, `focus` scrolls an element into it."""
        if dialect != "sqlite":
            return
        SHOTS.mkdir(parents=True, exist_ok=True)
        size = self.page.viewport_size
        if height:
            self.page.set_viewport_size({"width": size["width"], "height": height})
        if focus is not None:
            focus.scroll_into_view_if_needed()
        self.page.screenshot(path=str(SHOTS / f"{name}.png"))
        self.page.set_viewport_size(size)

    def close(self) -> None:
        self.context.close()


class Deck:
    def __init__(self, store: Store, db_url: str, workdir: Path, browser: Any, dialect: str) -> None:
        self.store, self.db_url, self.workdir, self.browser, self.dialect = (
            store,
            db_url,
            workdir,
            browser,
            dialect,
        )
        self.tokens = {
            role: store.create_token(f"{role}-deck", role, actor=Actor("test"))
            for role in ("reader", "operator", "admin")
        }
        self.procs: list[Served] = []
        self.consoles: list[Console] = []
        self.api: Served | None = None

    def serve(self, *args: str) -> Served:
        self.api = Served(self.db_url, self.workdir, f"deck{len(self.procs)}", *args)
        self.procs.append(self.api)
        return self.api

    def open(self, role: str) -> Console:
        assert self.api is not None
        console = Console(self.browser, self.api.base, self.tokens[role])
        self.consoles.append(console)
        return console

    def call(self, method: str, path: str, role: str = "admin", **kw: Any) -> Any:
        assert self.api is not None
        return self.api.call(method, "/api/v1" + path, self.tokens[role], **kw)


@pytest.fixture
def deck(db_url: str, dialect: str, tmp_path: Path, browser: Any) -> Iterator[Deck]:
    with Store(db_url, pool_size=4) as store:
        d = Deck(store, db_url, tmp_path, browser, dialect)
        try:
            yield d
            for console in d.consoles:
                assert not console.dialogs, f"a dialog opened: {console.dialogs}"
                assert not console.errors, f"errors in the page: {console.errors}"
        finally:
            for console in d.consoles:
                console.close()
            for proc in d.procs:
                proc.stop()
