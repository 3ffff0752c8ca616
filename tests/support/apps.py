"""API apps for tests without building one per test: `bound_app(settings)` (a fixture of tests/conftest.py).

Building an app takes about 50 ms, most of it the OpenAPI document, and the fast lane built several hundred.
An app reaches its settings, store, metrics and stream slots only through its context (context_for), so a
test process builds each app once per set of settings (the storage URL aside) and binds it to each test's
store with a fresh context: what create_app would have bound. The database stays the test's own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from chokaq_ops.settings import Settings
from chokaq_ops.storage import Store


class AppShell:
    """An app built once, with what a test could change on it, to notice when one did."""

    def __init__(self, settings: Settings, store: Store) -> None:
        from chokaq_api import create_app

        self.app = create_app(settings, store=store)
        self.config = dict(self.app.config)
        self.rules = len(list(self.app.url_map.iter_rules()))

    def unchanged(self) -> bool:
        return dict(self.app.config) == self.config and len(list(self.app.url_map.iter_rules())) == self.rules


@pytest.fixture(scope="session")
def app_shells() -> dict[tuple[str, int], AppShell]:
    return {}


@pytest.fixture
def bound_app(app_shells: dict[tuple[str, int], AppShell]) -> Iterator[Callable[..., Any]]:
    """`bound_app(settings, store=store)`: what `create_app(settings, store=store)` returns, from a shell.

    Each call within a test gives a distinct app, as create_app does (the second call with the same settings
    gets a second shell), so apps a test holds at once never share metrics or stream slots. A test that
    changed a shared app itself (its config or routes) would leak into the next: that fails at teardown."""
    from chokaq_api.app import context_for

    calls: Counter[str] = Counter()
    bound: list[AppShell] = []

    def bind(settings: Settings, *, store: Store) -> Any:
        shape = repr(replace(settings, storage=replace(settings.storage, url="")))
        key = (shape, calls[shape])
        calls[shape] += 1
        if key not in app_shells:
            app_shells[key] = AppShell(settings, store)
        shell = app_shells[key]
        shell.app.extensions["chokaq"] = context_for(settings, store)
        bound.append(shell)
        return shell.app

    yield bind
    for shell in bound:
        assert shell.unchanged(), "a test changed an app the tests share: build its own with create_app"
