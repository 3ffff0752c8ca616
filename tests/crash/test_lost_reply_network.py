"""Lost replies made by the network, not by a patched reader: every write below goes through a TCP proxy
that lets the statement reach PostgreSQL, lets it commit, then swallows the server's reply and closes the
connection (tests/crash/proxy.py, `lose_next_commit_reply`). The store sees what psqlODBC reports for a
dead socket, retries on a new connection, and must then find what its lost attempt did: no job run
twice, none lost, counters and audit rows written once (docs/storage-contract.md, "Lost replies";
docs/worker.md).

test_faults_lost_reply.py covers the same promises on both dialects by failing the result read; this
file checks that the real driver's failure takes the same path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chokaq_ops.models import Actor, FailureReason, NewJob
from chokaq_ops.storage import Dead, Retry, Store
from crash.proxy import CuttableProxy
from crash.support import counts

OPS = Actor("ops")


@pytest.fixture
def lossy(pg_url: str, proxy: CuttableProxy) -> Iterator[Store]:
    """A store whose one connection at a time runs through the proxy (no SSL: the proxy reads the
    protocol's messages to tell a commit's reply)."""
    url = proxy.url_for(pg_url)
    url += ("&" if "?" in url else "?") + "SSLmode=disable"
    with Store(url, pool_size=1, transient_retry_base_delay=0.01) as s:
        yield s


def lost_once(proxy: CuttableProxy, store: Store, *, retried: bool = True) -> None:
    assert proxy.lost_replies == 1, "the proxy never saw a committed reply to swallow"
    if retried:
        assert store.retries_done >= 1, "the store never retried"


def enqueue(store: Store, n: int, queue: str = "q") -> list[str]:
    return [r.id for r in store.enqueue([NewJob(type="t", id=f"{queue}-{i}", queue=queue) for i in range(n)])]


def test_a_claim_whose_reply_was_lost_gives_the_worker_every_job_it_took(pg_store, lossy, proxy):
    ids = enqueue(pg_store, 6)
    [warm] = lossy.fetch("w", 1, start=1)  # the connection is open and the claim planned (or prepared)
    proxy.lose_next_commit_reply()
    got = lossy.fetch("w", 3, start=3)  # commits three, loses the reply; the retry claims the last two
    lost_once(proxy, lossy)
    assert len(got) == 2 and {r.status for r in got} == {"processing"}
    assert lossy.claims_uncertain("w")
    known = {warm.id} | {r.id for r in got}
    recovered = lossy.recover_claims("w", known)
    assert sorted(known | {r.id for r in recovered}) == sorted(ids)  # every job is the worker's, once
    for r in recovered:  # started by the lost claim but never handed to user code: back to fetched
        job = pg_store.get_job(r.id)
        assert (job["status"], job["worker_id"], job["attempt_count"]) == ("fetched", "w", 0)
    assert not lossy.claims_uncertain("w")
    assert sorted(lossy.mark_processing("w", [r.id for r in recovered])) == sorted(r.id for r in recovered)


def test_a_start_whose_reply_was_lost_runs_its_jobs_once(pg_store, lossy, proxy):
    enqueue(pg_store, 4)
    ids = [r.id for r in lossy.fetch("w", 4)]  # fetched, buffered
    lossy.mark_processing("w", ids[:1])
    proxy.lose_next_commit_reply()
    marked = lossy.mark_processing("w", ids[1:])
    lost_once(proxy, lossy)
    assert sorted(marked) == sorted(ids[1:])
    assert {m.attempt_count for m in marked.values()} == {1}  # started once, counted once


def test_an_archive_whose_reply_was_lost_reports_its_jobs_archived_once(pg_store, lossy, proxy):
    enqueue(pg_store, 4)
    ids = [r.id for r in lossy.fetch("w", 4, start=4)]
    assert lossy.archive_succeeded("w", [(ids[0], 1.0)]) == ids[:1]
    proxy.lose_next_commit_reply()
    done = lossy.archive_succeeded("w", [(i, 2.0) for i in ids[1:]])
    lost_once(proxy, lossy)
    assert sorted(done) == sorted(ids[1:])  # the worker counts them done, not lost
    c = counts(pg_store)
    assert (c["hot"], c["archive"], c["succeeded_total"]) == (0, 4, 4)


def test_a_dead_letter_whose_reply_was_lost_is_moved_once(pg_store, lossy, proxy):
    enqueue(pg_store, 3)
    ids = [r.id for r in lossy.fetch("w", 3, start=3)]
    assert lossy.move_to_dlq("w", [Dead(ids[0], FailureReason.Fatal, "boom")]) == ids[:1]
    proxy.lose_next_commit_reply()
    moved = lossy.move_to_dlq("w", [Dead(i, FailureReason.MaxRetriesExceeded, "boom") for i in ids[1:]])
    lost_once(proxy, lossy)
    assert sorted(moved) == sorted(ids[1:])
    c = counts(pg_store)
    assert (c["hot"], c["dlq"], c["failed_total"]) == (0, 3, 3)


def test_a_retry_whose_reply_was_lost_is_rescheduled_once(pg_store, lossy, proxy):
    enqueue(pg_store, 3)
    ids = [r.id for r in lossy.fetch("w", 3, start=3)]
    assert lossy.reschedule("w", [Retry(ids[0], 60.0, "flaky")]) == ids[:1]
    proxy.lose_next_commit_reply()
    again = lossy.reschedule("w", [Retry(i, 60.0, "flaky") for i in ids[1:]])
    lost_once(proxy, lossy)
    assert sorted(again) == sorted(ids[1:])  # reported rescheduled, not lost to another owner
    jobs = [pg_store.get_job(i) for i in ids]
    assert {(j.status, j.attempt_count, j.worker_id) for j in jobs} == {("pending", 1, None)}


def test_a_single_enqueue_whose_reply_was_lost_is_new_once(pg_store, lossy, proxy):
    lossy.enqueue([NewJob(type="t")])  # the producer's statement is prepared on this connection
    proxy.lose_next_commit_reply()
    [res] = lossy.enqueue([NewJob(type="t", payload={"n": 1})])
    # Not a retry of the same statement: the checked one answers instead (Producer._enqueue_unsure).
    lost_once(proxy, lossy, retried=False)
    assert (res.status, res.created) == ("new", True)
    assert pg_store.get_job(res.id)["payload"] == '{"n":1}'
    c = counts(pg_store)
    assert c["hot"] == 2 == c["enqueued_total"]


def test_a_plain_batch_whose_reply_was_lost_is_new_once(pg_store, lossy, proxy):
    """enqueue_many of plain jobs: items without ordinals (storage/plain_batch.py), numbered for the checked
    statement only when its reply is lost."""
    for _ in range(2):  # both forms of the multi-row statement prepared (the queue unseen, then known)
        lossy.enqueue([NewJob(type="t"), NewJob(type="t")])
    proxy.lose_next_commit_reply()
    res = lossy.enqueue([NewJob(type="t", payload={"n": n}) for n in range(3)])
    lost_once(proxy, lossy, retried=False)
    assert [(r.status, r.created) for r in res] == [("new", True)] * 3
    assert [pg_store.get_job(r.id)["payload"] for r in res] == ['{"n":0}', '{"n":1}', '{"n":2}']
    c = counts(pg_store)
    assert c["hot"] == 7 == c["enqueued_total"]


def test_a_combined_group_whose_reply_was_lost_answers_each_caller_with_its_own_job(pg_store, lossy, proxy):
    """The Combiner's group (single enqueues of several threads) is items of one-job calls, each numbered
    0; after the lost reply each caller must get its own job back, in the group's order."""
    producer = lossy.producer
    for _ in range(2):  # both forms of the group's statement prepared (the queue unseen, then known)
        producer._enqueue_singles([producer._enqueue_items([NewJob(type="t")])[0][0] for _ in range(2)])
    proxy.lose_next_commit_reply()
    sent = [producer._enqueue_items([NewJob(type="t", payload={"n": n})])[0][0] for n in range(8)]
    assert {i["ord"] for i in sent} == {0}
    res = producer._enqueue_singles(sent)
    lost_once(proxy, lossy, retried=False)
    assert [(r.id, r.status) for r in res] == [(i["id"], "new") for i in sent]
    assert [pg_store.get_job(r.id)["payload"] for r in res] == [f'{{"n":{n}}}' for n in range(8)]
    c = counts(pg_store)
    assert c["hot"] == 12 == c["enqueued_total"]


@pytest.mark.parametrize("explicit", [False, True], ids=["generated-id", "explicit-id"])
def test_an_api_enqueue_whose_reply_was_lost_is_new_once_with_one_audit_row(pg_store, lossy, proxy, explicit):
    lossy.enqueue_audited(NewJob(type="t"), actor=OPS)
    proxy.lose_next_commit_reply()
    res = lossy.enqueue_audited(NewJob(type="t", id="own" if explicit else None), actor=OPS, max_queues=100)
    lost_once(proxy, lossy)
    assert (res.status, res.created) == ("new", True)  # the API's 201, not a 409 for its own job
    c = counts(pg_store)
    assert c["hot"] == 2 == c["enqueued_total"]
    assert [e.job_id for e in pg_store.list_audit(action="enqueue").items].count(res.id) == 1


def test_a_resurrect_whose_reply_was_lost_answers_with_the_resurrected_job(pg_store, lossy, proxy):
    [job] = enqueue(pg_store, 1)
    pg_store.fetch("w", 1, start=1)
    pg_store.move_to_dlq("w", [Dead(job, FailureReason.Fatal, "x")])
    lossy.get_job(job)  # the connection is open
    proxy.lose_next_commit_reply()
    got = lossy.resurrect(job, actor=OPS, priority=7)
    lost_once(proxy, lossy)
    assert (got["location"], got["status"], got["priority"]) == ("hot", "pending", 7)
    c = counts(pg_store)
    assert (c["hot"], c["dlq"], c["failed_total"]) == (1, 0, 0)
    assert [e.job_id for e in pg_store.list_audit(action="resurrect").items] == [job]
