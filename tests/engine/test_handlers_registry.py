"""@job registration, options, JobContext and handler-module loading."""

from __future__ import annotations

import sys

import pytest

import chokaq_ops
from chokaq_ops import errors
from chokaq_ops.engine import handlers
from chokaq_ops.engine.handlers import JobCancelled, JobContext, Registry, load_handler_modules


def test_job_registers_with_options():
    reg = Registry()

    @reg.job("email.send.v1", timeout=30, max_attempts=5, fatal=(KeyError,), idempotent=True)
    def send(payload, ctx):
        return payload

    h = reg.get("email.send.v1")
    assert h is not None and h.fn is send
    assert (h.timeout, h.max_attempts, h.fatal, h.idempotent) == (30.0, 5, (KeyError,), True)
    assert "email.send.v1" in reg and reg.types() == ["email.send.v1"]
    assert reg.get("other") is None


def test_public_names_resolve_to_the_engine():
    assert chokaq_ops.job is handlers.job
    assert chokaq_ops.JobContext is JobContext


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout": 0},
        {"timeout": -1},
        {"timeout": "10"},
        {"max_attempts": 0},
        {"max_attempts": True},
        {"fatal": ("KeyError",)},
    ],
)
def test_bad_options_name_the_field(kwargs):
    with pytest.raises(errors.ConfigError) as err:
        Registry().job("t", **kwargs)
    assert err.value.field == next(iter(kwargs))


def test_two_functions_cannot_claim_one_type():
    reg = Registry()
    reg.job("t")(lambda p, c: None)

    def other(payload, ctx):
        return None

    with pytest.raises(errors.ConfigError, match="already handled"):
        reg.job("t")(other)
    with pytest.raises(errors.ConfigError):
        reg.job("  ")(other)


def test_context_cancellation():
    ctx = JobContext(job_id="j1", attempt=2, queue="q", type="t", max_attempts=2)
    ctx.check_cancelled()
    assert ctx.is_last_attempt
    ctx.cancel("timeout")
    ctx.cancel("shutdown")  # the first reason stays
    assert ctx.cancelled.is_set()
    with pytest.raises(JobCancelled, match="timeout") as err:
        ctx.check_cancelled()
    assert err.value.reason == "timeout"


def test_load_handler_modules(tmp_path, monkeypatch):
    (tmp_path / "my_jobs_mod.py").write_text(
        "from chokaq_ops import job\n\n@job('loaded.by.name')\ndef h(payload, ctx):\n    pass\n"
    )
    (tmp_path / "broken_jobs_mod.py").write_text("import does_not_exist_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert load_handler_modules("my_jobs_mod, ") == ["my_jobs_mod"]
        assert "loaded.by.name" in handlers.registry
        with pytest.raises(errors.ConfigError, match=r"broken_jobs_mod.*does_not_exist_anywhere"):
            load_handler_modules(["broken_jobs_mod"])
    finally:
        handlers.registry.remove("loaded.by.name")
        sys.modules.pop("my_jobs_mod", None)
        sys.modules.pop("broken_jobs_mod", None)


def test_handler_modules_from_the_working_directory_cannot_shadow_installed_ones(tmp_path, monkeypatch):
    # A stray `json.py` where the server starts must not replace the standard library's json for
    # everything imported afterwards; the directory's own handler module still loads.
    (tmp_path / "json.py").write_text("raise RuntimeError('the working directory shadowed json')\n")
    (tmp_path / "cwd_jobs_mod.py").write_text("import json\n\nVALUE = json.dumps([1])\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    saved_json = sys.modules.pop("json")
    try:
        assert load_handler_modules("cwd_jobs_mod") == ["cwd_jobs_mod"]
        assert sys.modules["cwd_jobs_mod"].VALUE == "[1]"
        assert sys.path[-1] == str(tmp_path) and str(tmp_path) not in sys.path[:-1]
    finally:
        sys.modules["json"] = saved_json
        sys.modules.pop("cwd_jobs_mod", None)


def test_circuit_policy_comes_from_config_then_the_handler_then_circuit_defaults():
    from chokaq_ops.engine.circuits import _policy
    from chokaq_ops.engine.handlers import CircuitPolicy
    from chokaq_ops.settings import Settings

    reg = Registry()

    @reg.job("pay.v1", circuit=CircuitPolicy(failure_threshold=3, break_duration=60))
    def pay(payload, ctx): ...

    @reg.job("off.v1", circuit=False)
    def off(payload, ctx): ...

    settings = Settings().with_overrides(
        {"circuits.pay.v1.break_duration": "2m", "circuit.failure_window": "90s"}
    )
    p = _policy(settings, reg.get("pay.v1"), "pay.v1")
    assert (p["threshold"], p["break_s"], p["window_s"], p["half_open"]) == (3, 120.0, 90.0, 1)
    assert _policy(settings, reg.get("off.v1"), "off.v1") is None
    assert _policy(settings, None, "other")["threshold"] == 5  # Circuit.FailureThreshold
    assert _policy(settings.with_overrides({"circuit.enabled": False}), reg.get("pay.v1"), "pay.v1") is None
    with pytest.raises(errors.ConfigError):
        CircuitPolicy(failure_threshold=0)
