"""The frozen records an enqueue builds per job (NewJob, EnqueueResult) get their __init__ from
models._dict_init: the same parameters as the dataclass's own, filling the instance dict in one go."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from chokaq_ops import models
from chokaq_ops.models import EnqueueResult, NewJob


@pytest.mark.parametrize("cls", [NewJob, EnqueueResult])
def test_the_init_takes_the_fields_in_order_with_their_defaults(cls):
    params = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default == expected, p.name
    assert cls.__init__.__qualname__ == f"{cls.__name__}.__init__"
    # Ours fills the instance dict; the dataclass's own stores field by field through object.__setattr__.
    assert "__dict__" in cls.__init__.__code__.co_names
    assert "__setattr__" not in cls.__init__.__code__.co_names


def test_a_new_job_is_built_frozen_and_compares_and_replaces_like_a_dataclass():
    job = NewJob("t", queue="q", priority=3)
    assert (job.type, job.queue, job.priority, job.payload, job.tags) == ("t", "q", 3, "{}", None)
    assert job == NewJob(type="t", queue="q", priority=3)
    assert hash(job) == hash(NewJob(type="t", queue="q", priority=3))
    assert dataclasses.replace(job, queue="z").queue == "z"
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.queue = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        NewJob()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        NewJob("t", nope=1)  # type: ignore[call-arg]


def test_classes_it_cannot_build_faithfully_are_refused():
    @dataclasses.dataclass(frozen=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class WithPostInit:
        n: int

        def __post_init__(self) -> None:
            pass

    for cls in (WithFactory, WithPostInit):
        with pytest.raises(TypeError, match="plain fields only"):
            models._dict_init(cls)
