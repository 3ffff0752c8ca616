"""Traces across the queue (docs/tracing.md): the producer's W3C context stored with the job and carried
through every table, the worker's consumer span linked to it (in a real worker process), and nothing of
OpenTelemetry imported when the package is absent."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chokaq_ops import tracing
from chokaq_ops.models import Actor, FailureReason, NewJob
from chokaq_ops.storage import Dead
from tests.support.dbprobe import scalar
from tests.support.polling import wait_for
from tests.support.served import REPO, WorkerProc

pytestmark = pytest.mark.skipif(not tracing.ENABLED, reason="tracing turned off (CHOKAQ_TRACING)")


@pytest.fixture
def tracer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("tests.producer"), exporter


def traceparent(span) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}"  # the flags (sampled, random ids) aside


def stored(store, job_id: str) -> str | None:
    raw = store.get_job(job_id)["trace_context"]
    return None if raw is None else json.loads(raw)["traceparent"][:52]


def test_the_producers_context_travels_with_the_job_through_every_table(store, tracer):
    """Stored at enqueue on every enqueue path, returned by the claim, kept by the archive, the DLQ, a
    cancel and a resurrect (so a resurrected job still links to its producer)."""
    t, _ = tracer
    with t.start_as_current_span("request") as span:
        single = store.enqueue([NewJob(type="t", queue="tr")])[0].id
        batch = [
            r.id
            for r in store.enqueue([NewJob(type="t", queue="tr", idempotency_key=f"k{i}") for i in range(3)])
        ]
        explicit = store.enqueue([NewJob(type="t", queue="tr", id="explicit-1")])[0].id
        audited = store.enqueue_audited(NewJob(type="t", queue="tr"), actor=Actor("op")).id
    outside = store.enqueue([NewJob(type="t", queue="tr")])[0].id
    want = traceparent(span)
    for job in (single, *batch, explicit, audited):
        assert stored(store, job) == want, job
    assert store.get_job(outside)["trace_context"] is None

    claimed = store.fetch("w1", 10, queues=["tr"])
    assert {
        c.id: json.loads(c.trace_context)["traceparent"][:52] for c in claimed if c.trace_context
    } == dict.fromkeys((single, *batch, explicit, audited), want)
    store.mark_processing("w1", [single, batch[0]])
    store.archive_succeeded("w1", [(single, 1.0)])
    store.move_to_dlq("w1", [Dead(batch[0], FailureReason.Fatal, "ValueError: x")])
    store.cancel_many([batch[1]], actor=Actor("op"))
    assert stored(store, single) == want and store.get_job(single)["location"] == "archive"
    assert stored(store, batch[0]) == want and store.get_job(batch[0])["location"] == "dlq"
    assert stored(store, batch[1]) == want and store.get_job(batch[1])["location"] == "dlq"
    store.resurrect(batch[0], actor=Actor("op"))
    assert stored(store, batch[0]) == want and store.get_job(batch[0])["location"] == "hot"


def test_an_explicit_context_wins_and_is_bounded(store, tracer):
    t, _ = tracer
    given = json.dumps({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"})
    with t.start_as_current_span("request"):
        job = store.enqueue([NewJob(type="t", trace_context=given)])[0].id
    assert store.get_job(job)["trace_context"] == given
    from chokaq_ops import errors

    with pytest.raises(errors.ValidationError, match="trace_context"):
        store.enqueue([NewJob(type="t", trace_context="x" * 5000)])


def read_spans(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_a_real_worker_runs_each_job_in_a_consumer_span_linked_to_the_producer(
    db_url, store, tracer, tmp_path, monkeypatch
):
    """Producer span (this process, in-memory exporter) -> consumer spans exported by a real `chokaq
    worker` process: one per execution, each linked to the producer, with the messaging attributes; the
    handler's own span is a child; a failing run records the exception and an error status; the job
    resurrected from the DLQ runs again linked to the same producer span."""
    t, exporter = tracer
    spans_file = tmp_path / "spans.jsonl"
    (tmp_path / "chokaq.toml").write_text(
        '[Worker]\nPollingInterval = "100ms"\nShutdownGracePeriod = "2s"\n'
        '[Retry]\nMaxAttempts = 2\nBaseDelay = "100ms"\nJitterMaxDelay = 0\n'
        "[Circuit]\nEnabled = false\n"
    )
    with t.start_as_current_span("checkout request") as producer:
        ok, bad = (
            r.id
            for r in store.enqueue(
                [NewJob(type="traced.ok.v1", queue="traced"), NewJob(type="traced.fail.v1", queue="traced")]
            )
        )
    [exported] = exporter.get_finished_spans()
    assert exported.name == "checkout request"
    want = {
        "trace_id": f"{producer.get_span_context().trace_id:032x}",
        "span_id": f"{producer.get_span_context().span_id:016x}",
    }

    monkeypatch.setenv("CHOKAQ_TEST_SPANS", str(spans_file))
    worker = WorkerProc(db_url, tmp_path, "traced-w1", "--handlers", "tests.support.handlers_traced")
    try:
        wait_for(lambda: store.get_job(ok)["location"] == "archive", 20, "the ok job archived")
        wait_for(lambda: store.get_job(bad)["location"] == "dlq", 20, "the failing job dead-lettered")
        store.resurrect(bad, actor=Actor("op"))
        wait_for(
            lambda: (
                scalar(store, "SELECT count(*) FROM jobs_dlq WHERE id = ?", bad) == 1
                and len([s for s in read_spans(spans_file) if s["kind"] == "CONSUMER"]) == 5
            ),
            20,
            "the resurrected job dead again",
        )
    finally:
        worker.stop()

    spans = read_spans(spans_file)
    consumers = [s for s in spans if s["kind"] == "CONSUMER"]
    by_job = {}
    for s in consumers:
        by_job.setdefault(s["attributes"]["messaging.message.id"], []).append(s)
    assert sorted(by_job) == sorted([ok, bad])
    for s in consumers:
        assert s["name"] == "process traced"
        assert s["links"] == [want], "every execution links to the producer's span"
        assert s["trace_id"] != want["trace_id"], "a new trace, linked (not a child of the request)"
        a = s["attributes"]
        assert a["messaging.system"] == "chokaq"
        assert a["messaging.operation"] == "process" and a["messaging.operation.type"] == "process"
        assert a["messaging.destination.name"] == "traced"
        assert a["messaging.client.id"] == "traced-w1"

    [ok_span] = by_job[ok]
    assert ok_span["status"] == "UNSET" and ok_span["events"] == []
    assert (ok_span["attributes"]["chokaq.job.attempt"], ok_span["attributes"]["chokaq.job.outcome"]) == (
        1,
        "ok",
    )
    [child] = [s for s in spans if s["name"] == "handler work"]
    assert child["parent_span_id"] == ok_span["span_id"] and child["trace_id"] == ok_span["trace_id"]

    runs = sorted(by_job[bad], key=lambda s: s["span_id"])
    assert sorted(s["attributes"]["chokaq.job.attempt"] for s in runs) == [
        1,
        1,
        2,
        2,
    ]  # two lives, 2 attempts
    assert sorted(s["attributes"]["chokaq.job.outcome"] for s in runs) == ["dead", "dead", "retry", "retry"]
    for s in runs:
        assert s["status"] == "ERROR"
        [event] = s["events"]
        assert event["name"] == "exception"
        assert event["attributes"]["exception.type"] == "RuntimeError"
        assert event["attributes"]["exception.message"] == "boom 0"
        assert "traced_fail" in event["attributes"]["exception.stacktrace"]
        assert s["attributes"]["error.type"] == "builtins.RuntimeError"
    assert {s["attributes"].get("chokaq.job.failure_reason") for s in runs} == {None, "MaxRetriesExceeded"}


BLOCK_OTEL = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoOtel(importlib.abc.MetaPathFinder):
        # The `otel` extra "not installed": every opentelemetry import fails as it would then.
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, NoOtel())
    """
)

WITHOUT_OTEL = textwrap.dedent(
    """
    import sys, tempfile, time
    from chokaq_ops import tracing
    from chokaq_ops.engine.handlers import Registry
    from chokaq_ops.engine.worker import Worker
    from chokaq_ops.models import NewJob
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store
    from chokaq_ops.storage.migrate import migrate

    registry = Registry()
    registry.job("plain.v1")(lambda payload, ctx: None)
    url = "sqlite:///" + tempfile.mkdtemp() + "/db.sqlite"
    with Store(url) as store:
        migrate(store)
        job = store.enqueue([NewJob(type="plain.v1")])[0].id
        worker = Worker(store, Settings().with_overrides({"storage.url": url}), registry=registry)
        worker.start()
        deadline = time.monotonic() + 20
        while store.get_job(job)["location"] != "archive" and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.stop(5)
        print(store.get_job(job)["location"], store.get_job(job)["trace_context"], tracing.ENABLED)
    print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
    """
)


def fresh_interpreter(script: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    """`script` run by a clean interpreter (PATH and PYTHONPATH alone in its environment), which must
    exit 0."""
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out


@pytest.mark.slow
def test_without_the_package_nothing_of_opentelemetry_is_imported(tmp_path):
    """A clean interpreter where opentelemetry cannot be imported: chokaq imports, enqueues and runs a job
    through a worker, and no opentelemetry module was ever loaded."""
    (tmp_path / "sitecustomize.py").write_text(BLOCK_OTEL)
    out = fresh_interpreter(WITHOUT_OTEL, f"{tmp_path}:{REPO}")
    lines = out.stdout.strip().splitlines()
    assert lines == ["archive None False", "[]"], out.stdout + out.stderr


NO_PROVIDER_THEN_ONE = textwrap.dedent(
    """
    import tempfile, time
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from chokaq_ops import tracing
    from chokaq_ops.engine.handlers import Registry
    from chokaq_ops.engine.worker import Worker
    from chokaq_ops.models import NewJob
    from chokaq_ops.settings import Settings
    from chokaq_ops.storage import Store
    from chokaq_ops.storage.migrate import migrate

    made = []

    class Counted(tracing.ConsumerSpan):
        def __init__(self, **kw):
            made.append(kw["job_id"])
            super().__init__(**kw)

    tracing.ConsumerSpan = Counted
    registry = Registry()
    registry.job("plain.v1")(lambda payload, ctx: None)
    url = "sqlite:///" + tempfile.mkdtemp() + "/db.sqlite"

    def run_two(store):
        ids = [j.id for j in store.enqueue([NewJob(type="plain.v1") for _ in range(2)])]
        deadline = time.monotonic() + 20
        while any(store.get_job(i)["location"] != "archive" for i in ids) and time.monotonic() < deadline:
            time.sleep(0.05)
        return ids

    with Store(url) as store:
        migrate(store)
        worker = Worker(store, Settings().with_overrides({"storage.url": url}), registry=registry)
        worker.start()
        before = run_two(store)
        print(len(made), tracing.consumer_spans())
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)  # after the worker started, as an application may
        time.sleep(tracing.PROVIDER_LOOK_S + 0.1)  # the worker looks for one at most this often
        after = run_two(store)
        worker.stop(5)
        spans = sorted(s.attributes["messaging.message.id"] for s in exporter.get_finished_spans())
        print(sorted(made) == sorted(after), spans == sorted(after))
    """
)


def test_no_consumer_span_is_made_until_a_tracer_provider_is_set(tmp_path):
    """With the package installed but no tracer provider, a span could record nothing and the handler
    would see the same (invalid) current span as without one: the worker makes none. A provider the
    application sets later, while the worker runs, gets a span for every execution from then on (seen
    within tracing.PROVIDER_LOOK_S)."""
    out = fresh_interpreter(NO_PROVIDER_THEN_ONE, str(REPO))
    assert out.stdout.strip().splitlines() == ["0 False", "True True"], out.stdout + out.stderr
