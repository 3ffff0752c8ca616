"""The Store is a facade over its parts (docs/architecture.md, "Storage"): each forwarding method keeps
the signature of the part's method it forwards to, and no storage class is assembled from mixins."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import chokaq_ops.storage
from chokaq_ops.storage import Store

PARTS = ("producer", "worker", "rescue", "leases", "reads", "admin", "plans", "circuits", "registry")
PARTS += ("failures", "events", "tokens", "alerts", "schedules", "horizons")


def test_every_public_method_of_a_part_is_on_the_store_with_the_same_signature():
    store = Store("sqlite:///:memory:")
    try:
        for attr in PARTS:
            part = getattr(store, attr)
            for name, method in inspect.getmembers(part, inspect.ismethod):
                if name.startswith("_"):
                    continue
                facade = getattr(store, name)
                assert inspect.signature(facade) == inspect.signature(method), f"Store.{name} vs {attr}"
    finally:
        store.close()


def test_storage_classes_inherit_only_to_specialise_a_dialect_or_an_error():
    for info in pkgutil.iter_modules(chokaq_ops.storage.__path__):
        module = importlib.import_module(f"chokaq_ops.storage.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            own = [b for b in cls.__bases__ if b.__module__.startswith("chokaq_ops.")]
            assert len(own) <= 1, cls
            if own and not issubclass(cls, BaseException):
                assert own[0].__name__ == "Dialect", f"{cls.__qualname__} inherits {own[0].__qualname__}"
