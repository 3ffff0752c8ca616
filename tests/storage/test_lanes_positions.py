"""How a worker moves its lane positions from what a claim returned (storage/lanes.py, docs/endurance.md):
the claim reports per lane only its first candidate left; everything else is worked out from the jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chokaq_ops.storage.lanes import FORGET_S, START, Lanes, Position

T0 = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _job(job_id: str, due_s: float, queue: str = "q", priority: int = 10) -> dict:
    return {"kind": "job", "id": job_id, "queue": queue, "priority": priority, "due_at": _at(due_s),
            "status": 2, "snap_xmax": None, "snap_xip": None, "tid": None}  # fmt: skip


def _lane(job_id: str, due_s: float, tid: str = "(0,1)", queue: str = "q", priority: int = 10) -> dict:
    return {
        "kind": "lane",
        "id": job_id,
        "queue": queue,
        "priority": priority,
        "due_at": _at(due_s),
        "tid": tid,
    }


SNAP = {"kind": "snap", "snap_xmax": "100", "snap_xip": "[]"}


def _lanes(*positions: tuple[tuple[str, int], Position]) -> Lanes:
    lanes = Lanes(None)
    lanes.positions = dict(positions)
    lanes.known = True
    return lanes


def test_a_lane_whose_candidates_were_all_taken_reads_on_after_the_last_job():
    lanes = _lanes((("q", 10), Position(START, "", False)))
    jobs = lanes._absorb([_job("b", 2), _job("a", 1), _job("c", 2), SNAP], now=0.0)
    assert [j["id"] for j in jobs] == ["b", "a", "c"]
    assert "kind" not in jobs[0] and "tid" not in jobs[0]
    pos = lanes.positions[("q", 10)]
    assert (pos.at, pos.id, pos.passed) == (_at(2), "c", True)
    assert pos.due == _at(2).isoformat()  # what the next claim sends: the exact time


def test_a_lane_reads_on_from_its_first_candidate_left():
    lanes = _lanes((("q", 10), Position(START, "", False)))
    lanes._absorb([_job("a", 1), _lane("d", 3), SNAP], now=0.0)
    pos = lanes.positions[("q", 10)]
    assert (pos.at, pos.id, pos.passed) == (_at(3), "d", False)
    assert lanes.held_since == {}  # nothing taken after it: not held, only not reached


def test_jobs_taken_behind_the_position_do_not_move_it_back():
    """A job put back behind the position (read through ready_xid) and claimed: the position stays."""
    here = Position.of(_at(5), "e", True)
    lanes = _lanes((("q", 10), here))
    lanes._absorb([_job("late", 1), SNAP], now=0.0)
    assert lanes.positions[("q", 10)] is here and here.empty_since is None


def test_a_first_candidate_left_before_a_job_taken_is_held_then_stuck():
    lanes = _lanes((("q", 10), Position(START, "", False)))
    rows = [_job("b", 2), _lane("a", 1, tid="(7,3)"), SNAP]
    lanes._absorb([dict(r) for r in rows], now=0.0)
    assert lanes.held_since == {"a": 0.0} and lanes.stuck == {}
    assert lanes.positions[("q", 10)].id == "a"  # the position does not pass it yet
    lanes._absorb([dict(r) for r in rows], now=10.0)
    assert lanes.stuck == {"a": "(7,3)"}  # passed from now on, looked up by its ctid
    assert lanes._params(8)["stuck"] == [{"id": "a", "t": "(7,3)"}]
    assert "stuck" not in lanes._params(8, full=False)


def test_an_empty_lane_is_kept_for_a_while_then_forgotten():
    here = Position.of(_at(5), "e", True)
    lanes = _lanes((("q", 10), here))
    lanes._absorb([SNAP], now=100.0)
    assert lanes.positions[("q", 10)].empty_since == 100.0
    lanes._absorb([SNAP], now=100.0 + FORGET_S + 1)
    assert ("q", 10) not in lanes.positions


def test_a_closed_queue_is_forgotten_and_found_again_when_it_opens():
    lanes = _lanes((("q", 10), Position.of(_at(5), "e", True)), (("r", 1), Position(START, "", False)))
    lanes._absorb([{"kind": "closed", "queue": "q"}, _job("x", 1, queue="r", priority=1), SNAP], now=0.0)
    assert set(lanes.positions) == {("r", 1)} and lanes.closed == {"q"}
    lanes._absorb([SNAP], now=1.0)
    assert lanes.reopened == ["q"]


def test_a_lane_met_for_the_first_time_starts_where_the_claim_left_it():
    lanes = _lanes()
    lanes._absorb(
        [_job("n1", 1, queue="new"), _lane("n2", 2, queue="new"), _job("m", 4, queue="more"), SNAP], 0.0
    )
    assert (lanes.positions[("new", 10)].id, lanes.positions[("new", 10)].passed) == ("n2", False)
    assert (lanes.positions[("more", 10)].id, lanes.positions[("more", 10)].passed) == ("m", True)


def test_a_capped_queue_named_by_the_open_claim_sends_the_next_claims_to_fetch():
    lanes = _lanes()
    calls: list[str] = []

    def run(name: str, **params) -> list[dict]:
        calls.append(name)
        if name == "fetch_open":
            return [{"kind": "capped", "queue": "slow"}, SNAP]
        return [_job("a", 1), {"kind": "capped", "queue": "slow"}, SNAP]

    got = lanes.claim(run, lambda **p: [], {"limit": 4, "start": 4})
    assert calls == ["fetch_open", "fetch"] and [j["id"] for j in got] == ["a"]
    lanes.claim(run, lambda **p: [], {"limit": 4, "start": 4})
    assert calls == ["fetch_open", "fetch", "fetch"]  # while the cap lasts
