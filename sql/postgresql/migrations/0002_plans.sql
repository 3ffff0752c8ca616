-- 0002: bulk-decision plans and their items (resumable resurrect / purge / cancel).
-- Bulk-decision plans (chokaq_ops.storage.plan_ops): the frozen set of jobs a resurrect / purge / cancel
-- acts on, and how far its execution got. A chunk's items are marked done in the same transaction as the
-- move, so an interrupted plan resumes where it stopped and never touches a job twice.
CREATE TABLE plans (
    id           varchar(50)  NOT NULL,
    action       varchar(20)  NOT NULL,
    actor        varchar(100) NOT NULL,
    state        varchar(20)  NOT NULL DEFAULT 'ready',
    created_at   timestamptz  NOT NULL DEFAULT now(),
    updated_at   timestamptz  NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    chunk_size   integer      NOT NULL,
    total        integer      NOT NULL DEFAULT 0,
    chunks       integer      NOT NULL DEFAULT 0,
    chunks_done  integer      NOT NULL DEFAULT 0,
    done         integer      NOT NULL DEFAULT 0,
    skipped      integer      NOT NULL DEFAULT 0,
    details      text,
    CONSTRAINT pk_plans PRIMARY KEY (id),
    CONSTRAINT ck_plans_action CHECK (action IN ('resurrect', 'purge', 'cancel')),
    CONSTRAINT ck_plans_state CHECK (state IN ('ready', 'running', 'done', 'discarded'))
);
CREATE INDEX ix_plans_created ON plans (created_at, id);

-- One row per job of a plan. `outcome`: done (acted on) or skipped (no longer where the plan found it).
CREATE TABLE plan_items (
    plan_id   varchar(50)   NOT NULL,
    job_id    varchar(50)   NOT NULL,
    chunk     integer       NOT NULL,
    ord       integer       NOT NULL,
    payload   text,
    tags      varchar(1000),
    priority  integer,
    done_at   timestamptz,
    outcome   varchar(10),
    CONSTRAINT pk_plan_items PRIMARY KEY (plan_id, job_id),
    CONSTRAINT ck_plan_items_outcome CHECK (outcome IS NULL OR outcome IN ('done', 'skipped'))
);
-- The next chunk to run: only unfinished items are indexed, so a resumed 1M-item plan finds it at once.
CREATE INDEX ix_plan_items_pending ON plan_items (plan_id, chunk) WHERE done_at IS NULL;
CREATE INDEX ix_plan_items_order ON plan_items (plan_id, ord);
