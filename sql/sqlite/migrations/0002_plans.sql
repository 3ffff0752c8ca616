-- 0002: bulk-decision plans and their items (resumable resurrect / purge / cancel).
-- Bulk-decision plans (chokaq_ops.storage.plan_ops): the frozen set of jobs a resurrect / purge / cancel
-- acts on, and how far its execution got. A chunk's items are marked done in the same transaction as the
-- move, so an interrupted plan resumes where it stopped and never touches a job twice.
CREATE TABLE plans (
    id           TEXT    NOT NULL PRIMARY KEY,
    action       TEXT    NOT NULL CHECK (action IN ('resurrect', 'purge', 'cancel')),
    actor        TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done', 'discarded')),
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    finished_at  TEXT,
    chunk_size   INTEGER NOT NULL,
    total        INTEGER NOT NULL DEFAULT 0,
    chunks       INTEGER NOT NULL DEFAULT 0,
    chunks_done  INTEGER NOT NULL DEFAULT 0,
    done         INTEGER NOT NULL DEFAULT 0,
    skipped      INTEGER NOT NULL DEFAULT 0,
    details      TEXT
);
CREATE INDEX ix_plans_created ON plans (created_at, id);

-- One row per job of a plan. `outcome`: done (acted on) or skipped (no longer where the plan found it).
CREATE TABLE plan_items (
    plan_id   TEXT    NOT NULL,
    job_id    TEXT    NOT NULL,
    chunk     INTEGER NOT NULL,
    ord       INTEGER NOT NULL,
    payload   TEXT,
    tags      TEXT,
    priority  INTEGER,
    done_at   TEXT,
    outcome   TEXT    CHECK (outcome IS NULL OR outcome IN ('done', 'skipped')),
    PRIMARY KEY (plan_id, job_id)
);
-- The next chunk to run: only unfinished items are indexed, so a resumed 1M-item plan finds it at once.
CREATE INDEX ix_plan_items_pending ON plan_items (plan_id, chunk) WHERE done_at IS NULL;
CREATE INDEX ix_plan_items_order ON plan_items (plan_id, ord);
