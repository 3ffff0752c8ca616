from chokaq_ops.models import NewJob


def test_enqueue_then_fetch_claims_the_job(store):
    [res] = store.enqueue([NewJob(type="t")])
    rows = store.fetch("w", 10)
    assert [r["id"] for r in rows] == [res.id]
    assert store.get_job(res.id)["status"] == "fetched"
