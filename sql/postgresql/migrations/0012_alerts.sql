-- 0012: alerts that reach a person (docs/alerts.md). Receivers and rules made over the API or the CLI
-- (those of the configuration file are read from it, not stored), and the state of the rule loop: every
-- active alert, and every notification group (Alertmanager's grouping: what was last sent, and when).
-- The secret and the URL of a receiver are stored as given (chokaq must sign and send with them) and
-- never leave the process in a response, a log line, an audit row or an error.
CREATE TABLE alert_receivers (
    name           varchar(100) NOT NULL,
    kind           varchar(20)  NOT NULL,
    url            text         NOT NULL,
    secret         text,
    send_resolved  boolean      NOT NULL DEFAULT true,
    timeout_s      double precision NOT NULL DEFAULT 10,
    max_alerts     integer      NOT NULL DEFAULT 0,
    created_at     timestamptz  NOT NULL DEFAULT now(),
    created_by     varchar(100),
    updated_at     timestamptz  NOT NULL DEFAULT now(),
    updated_by     varchar(100),
    CONSTRAINT pk_alert_receivers PRIMARY KEY (name),
    CONSTRAINT ck_alert_receivers_kind CHECK (kind IN ('webhook', 'slack'))
);
CREATE TABLE alert_rules (
    name               varchar(100) NOT NULL,
    kind               varchar(30)  NOT NULL,
    receivers          text         NOT NULL,
    severity           varchar(20)  NOT NULL DEFAULT 'warning',
    threshold          double precision,
    window_s           double precision,
    for_s              double precision NOT NULL DEFAULT 0,
    repeat_interval_s  double precision,
    group_by           text,
    queues             text,
    by_label           varchar(20),
    inhibited_by       text,
    inhibit_equal      text,
    enabled            boolean      NOT NULL DEFAULT true,
    created_at         timestamptz  NOT NULL DEFAULT now(),
    created_by         varchar(100),
    updated_at         timestamptz  NOT NULL DEFAULT now(),
    updated_by         varchar(100),
    CONSTRAINT pk_alert_rules PRIMARY KEY (name)
);
-- One row per active (pending or firing) alert, and per resolved one until its resolve is sent.
CREATE TABLE alert_state (
    rule           varchar(100) NOT NULL,
    alert_key      varchar(40)  NOT NULL,
    labels         text         NOT NULL,
    annotations    text         NOT NULL,
    value          double precision,
    status         varchar(10)  NOT NULL,
    active_at   timestamptz  NOT NULL,
    firing_at   timestamptz,
    resolved_at    timestamptz,
    updated_at     timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT pk_alert_state PRIMARY KEY (rule, alert_key),
    CONSTRAINT ck_alert_state_status CHECK (status IN ('pending', 'firing', 'resolved'))
);
-- One row per notification group (receiver, rule, values of the rule's group_by labels).
CREATE TABLE alert_groups (
    receiver       varchar(100) NOT NULL,
    group_key      varchar(40)  NOT NULL,
    rule           varchar(100) NOT NULL,
    group_labels   text         NOT NULL,
    sent_keys      text         NOT NULL DEFAULT '[]',
    seq            integer      NOT NULL DEFAULT 0,
    created_at     timestamptz  NOT NULL,
    last_sent_at   timestamptz,
    CONSTRAINT pk_alert_groups PRIMARY KEY (receiver, group_key)
);
