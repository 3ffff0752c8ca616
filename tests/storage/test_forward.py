"""The Store's forwards (storage/forward.py): each is its part's method, bound to the part."""

from __future__ import annotations

import pytest

from chokaq_ops.storage import Store
from chokaq_ops.storage.forward import forward
from chokaq_ops.storage.read_ops import ReadOps
from chokaq_ops.storage.worker_ops import WorkerOps


def test_a_forward_is_the_parts_bound_method(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'f.db'}") as store:
        assert store.fetch == store.worker.fetch
        assert store.list_hot == store.reads.list_hot
        assert Store.fetch.__doc__ == WorkerOps.fetch.__doc__  # help() shows the part's documentation


def test_a_forward_follows_a_replaced_part(tmp_path):
    """Forwarding looks the part up on every call: a part swapped (as tests patch one) is the one used."""

    class Reads(ReadOps):
        def count_dlq(self, flt=None):
            return -1

    with Store(f"sqlite:///{tmp_path / 'f.db'}") as store:
        store.reads = Reads(store.db)
        assert store.count_dlq() == -1


def test_a_forward_under_another_name_is_refused():
    with pytest.raises((TypeError, RuntimeError)) as raised:  # Python 3.11 wraps it in a RuntimeError

        class Facade:
            claim = forward("worker", WorkerOps.fetch)

    assert "use the same name" in f"{raised.value} {raised.value.__cause__}"
