-- 0008: alerts that reach a person (docs/alerts.md). Receivers and rules made over the API or the CLI
-- (those of the configuration file are read from it, not stored), and the state of the rule loop: every
-- active alert, and every notification group (Alertmanager's grouping: what was last sent, and when).
-- The secret and the URL of a receiver are stored as given (chokaq must sign and send with them) and
-- never leave the process in a response, a log line, an audit row or an error.
CREATE TABLE alert_receivers (
    name           TEXT NOT NULL,
    kind           TEXT  NOT NULL,
    url            TEXT         NOT NULL,
    secret         TEXT,
    send_resolved  INTEGER NOT NULL DEFAULT 1,
    timeout_s      REAL NOT NULL DEFAULT 10,
    max_alerts     INTEGER      NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by     TEXT,
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_by     TEXT,
    CONSTRAINT pk_alert_receivers PRIMARY KEY (name),
    CONSTRAINT ck_alert_receivers_kind CHECK (kind IN ('webhook', 'slack'))
);
CREATE TABLE alert_rules (
    name               TEXT NOT NULL,
    kind               TEXT  NOT NULL,
    receivers          TEXT         NOT NULL,
    severity           TEXT  NOT NULL DEFAULT 'warning',
    threshold          REAL,
    window_s           REAL,
    for_s              REAL NOT NULL DEFAULT 0,
    repeat_interval_s  REAL,
    group_by           TEXT,
    queues             TEXT,
    by_label           TEXT,
    inhibited_by       TEXT,
    inhibit_equal      TEXT,
    enabled            INTEGER NOT NULL DEFAULT 1,
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_by         TEXT,
    updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_by         TEXT,
    CONSTRAINT pk_alert_rules PRIMARY KEY (name)
);
-- One row per active (pending or firing) alert, and per resolved one until its resolve is sent.
CREATE TABLE alert_state (
    rule           TEXT NOT NULL,
    alert_key      TEXT  NOT NULL,
    labels         TEXT         NOT NULL,
    annotations    TEXT         NOT NULL,
    value          REAL,
    status         TEXT  NOT NULL,
    active_at   TEXT  NOT NULL,
    firing_at   TEXT,
    resolved_at    TEXT,
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT pk_alert_state PRIMARY KEY (rule, alert_key),
    CONSTRAINT ck_alert_state_status CHECK (status IN ('pending', 'firing', 'resolved'))
);
-- One row per notification group (receiver, rule, values of the rule's group_by labels).
CREATE TABLE alert_groups (
    receiver       TEXT NOT NULL,
    group_key      TEXT  NOT NULL,
    rule           TEXT NOT NULL,
    group_labels   TEXT         NOT NULL,
    sent_keys      TEXT         NOT NULL DEFAULT '[]',
    seq            INTEGER      NOT NULL DEFAULT 0,
    created_at     TEXT  NOT NULL,
    last_sent_at   TEXT,
    CONSTRAINT pk_alert_groups PRIMARY KEY (receiver, group_key)
);
