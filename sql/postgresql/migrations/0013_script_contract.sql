-- 0013: one contract for scripts and notebooks (docs/cli-json.md, docs/notebooks.md "Labels, leases, pace").
-- A plan's pace is the plan's own: `rate` (jobs/s, NULL: unpaced) and `not_before`, the earliest start of
-- its next chunk, advanced by every chunk whoever runs it, so two processes working one plan share one pace.
-- A run holds the plan's lease (`lease_holder` until `lease_until`, renewed by every chunk it runs): one
-- label is worked by one run at a time.
ALTER TABLE plans ADD COLUMN rate double precision;
ALTER TABLE plans ADD COLUMN not_before timestamptz;
ALTER TABLE plans ADD COLUMN lease_holder varchar(200);
ALTER TABLE plans ADD COLUMN lease_until timestamptz;
-- At most one unfinished plan per label and action: two first runs of one label cannot both freeze one.
CREATE UNIQUE INDEX ux_plans_open_label ON plans (label, action)
    WHERE label IS NOT NULL AND state IN ('ready', 'running');
-- Plans being frozen: the row exists from the first batch of items to the plan's creation and is beaten
-- every batch, so the items of a freeze whose process died are found and reclaimed (no orphan rows).
CREATE TABLE plan_freezes (
    plan_id     varchar(50)  NOT NULL,
    actor       varchar(100) NOT NULL,
    state       varchar(10)  NOT NULL DEFAULT 'freezing',
    started_at  timestamptz  NOT NULL DEFAULT now(),
    beat_at     timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_plan_freezes PRIMARY KEY (plan_id),
    CONSTRAINT ck_plan_freezes_state CHECK (state IN ('freezing', 'reclaiming'))
);
-- Items left by freezes killed before this migration belong to no plan: they become abandoned freezes
-- (beaten long ago), reclaimed like any other.
INSERT INTO plan_freezes (plan_id, actor, started_at, beat_at)
SELECT DISTINCT i.plan_id, 'unknown', timestamptz 'epoch', timestamptz 'epoch'
FROM plan_items i WHERE NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = i.plan_id);
-- A resurrect that renews a job's retry budget restarts its lifetime clock (Retry.MaxJobAge) here;
-- NULL: the clock runs from created_at.
ALTER TABLE jobs_hot ADD COLUMN renewed_at timestamptz;
