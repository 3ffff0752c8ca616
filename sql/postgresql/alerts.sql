-- Named queries of the alerts (docs/alerts.md), PostgreSQL. Format: see chokaq_ops/storage/queries.py;
-- loaded with queries.sql into the store's queries (storage/database.py).

-- ---------------------------------------------------------------- receivers and rules (audited by the caller's transaction)

-- name: alert_receivers_list
SELECT name, kind, url, secret, send_resolved, timeout_s, max_alerts, created_at, created_by, updated_at,
       updated_by
FROM alert_receivers ORDER BY name;

-- name: alert_receiver_lock
-- One receiver, its row locked until the transaction ends (an update reads, merges and writes it).
SELECT name, kind, url, secret, send_resolved, timeout_s, max_alerts, created_at, created_by, updated_at,
       updated_by
FROM alert_receivers WHERE name = CAST(:name AS text) FOR UPDATE;

-- name: alert_receiver_insert
INSERT INTO alert_receivers (name, kind, url, secret, send_resolved, timeout_s, max_alerts, created_by, updated_by)
VALUES (CAST(:name AS text), CAST(:kind AS text), CAST(:url AS text), CAST(:secret AS text),
        CAST(:send_resolved AS boolean), CAST(:timeout_s AS double precision), CAST(:max_alerts AS integer),
        CAST(:actor AS text), CAST(:actor AS text))
ON CONFLICT DO NOTHING
RETURNING name;

-- name: alert_receiver_write
UPDATE alert_receivers SET kind = CAST(:kind AS text), url = CAST(:url AS text), secret = CAST(:secret AS text),
    send_resolved = CAST(:send_resolved AS boolean), timeout_s = CAST(:timeout_s AS double precision),
    max_alerts = CAST(:max_alerts AS integer), updated_at = now(), updated_by = CAST(:actor AS text)
WHERE name = CAST(:name AS text)
RETURNING name;

-- name: alert_receiver_delete
DELETE FROM alert_receivers WHERE name = CAST(:name AS text) RETURNING name;

-- name: alert_rules_list
SELECT name, kind, receivers, severity, threshold, window_s, for_s, repeat_interval_s, group_by, queues, by_label,
       inhibited_by, inhibit_equal, enabled, created_at, created_by, updated_at, updated_by
FROM alert_rules ORDER BY name;

-- name: alert_rule_lock
SELECT name, kind, receivers, severity, threshold, window_s, for_s, repeat_interval_s, group_by, queues, by_label,
       inhibited_by, inhibit_equal, enabled, created_at, created_by, updated_at, updated_by
FROM alert_rules WHERE name = CAST(:name AS text) FOR UPDATE;

-- name: alert_rule_insert
INSERT INTO alert_rules (name, kind, receivers, severity, threshold, window_s, for_s, repeat_interval_s, group_by,
                         queues, by_label, inhibited_by, inhibit_equal, enabled, created_by, updated_by)
VALUES (CAST(:name AS text), CAST(:kind AS text), CAST(:receivers AS text), CAST(:severity AS text),
        CAST(:threshold AS double precision), CAST(:window_s AS double precision), CAST(:for_s AS double precision),
        CAST(:repeat_interval_s AS double precision), CAST(:group_by AS text), CAST(:queues AS text),
        CAST(:by_label AS text), CAST(:inhibited_by AS text), CAST(:inhibit_equal AS text),
        CAST(:enabled AS boolean), CAST(:actor AS text), CAST(:actor AS text))
ON CONFLICT DO NOTHING
RETURNING name;

-- name: alert_rule_write
UPDATE alert_rules SET kind = CAST(:kind AS text), receivers = CAST(:receivers AS text),
    severity = CAST(:severity AS text), threshold = CAST(:threshold AS double precision),
    window_s = CAST(:window_s AS double precision), for_s = CAST(:for_s AS double precision),
    repeat_interval_s = CAST(:repeat_interval_s AS double precision), group_by = CAST(:group_by AS text),
    queues = CAST(:queues AS text), by_label = CAST(:by_label AS text), inhibited_by = CAST(:inhibited_by AS text),
    inhibit_equal = CAST(:inhibit_equal AS text), enabled = CAST(:enabled AS boolean), updated_at = now(),
    updated_by = CAST(:actor AS text)
WHERE name = CAST(:name AS text)
RETURNING name;

-- name: alert_rule_delete
DELETE FROM alert_rules WHERE name = CAST(:name AS text) RETURNING name;

-- ---------------------------------------------------------------- the rule loop's state

-- name: alert_states
SELECT rule, alert_key, labels, annotations, value, status, active_at, firing_at, resolved_at
FROM alert_state ORDER BY rule, alert_key;

-- name: alert_state_upsert
-- :items, JSON [{rule, alert_key, labels, annotations, value, status, active_at, firing_at, resolved_at}].
INSERT INTO alert_state AS s (rule, alert_key, labels, annotations, value, status, active_at, firing_at,
                              resolved_at, updated_at)
SELECT i.rule, i.alert_key, i.labels, i.annotations, i.value, i.status, i.active_at, i.firing_at,
       i.resolved_at, now()
FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(rule text, alert_key text, labels text, annotations text,
    value double precision, status text, active_at timestamptz, firing_at timestamptz,
    resolved_at timestamptz)
ORDER BY i.rule, i.alert_key
ON CONFLICT (rule, alert_key) DO UPDATE SET labels = excluded.labels, annotations = excluded.annotations,
    value = excluded.value, status = excluded.status, active_at = excluded.active_at,
    firing_at = excluded.firing_at, resolved_at = excluded.resolved_at, updated_at = excluded.updated_at;

-- name: alert_state_delete
-- :items, JSON [{rule, alert_key}].
DELETE FROM alert_state s USING jsonb_to_recordset(CAST(:items AS jsonb)) AS i(rule text, alert_key text)
WHERE s.rule = i.rule AND s.alert_key = i.alert_key;

-- name: alert_groups_list
SELECT receiver, group_key, rule, group_labels, sent_keys, seq, created_at, last_sent_at
FROM alert_groups ORDER BY receiver, group_key;

-- name: alert_group_upsert
-- :items, JSON [{receiver, group_key, rule, group_labels, sent_keys, seq, created_at, last_sent_at}].
INSERT INTO alert_groups AS g (receiver, group_key, rule, group_labels, sent_keys, seq, created_at, last_sent_at)
SELECT i.receiver, i.group_key, i.rule, i.group_labels, i.sent_keys, i.seq, i.created_at, i.last_sent_at
FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS i(receiver text, group_key text, rule text, group_labels text,
    sent_keys text, seq integer, created_at timestamptz, last_sent_at timestamptz)
ORDER BY i.receiver, i.group_key
ON CONFLICT (receiver, group_key) DO UPDATE SET rule = excluded.rule, group_labels = excluded.group_labels,
    sent_keys = excluded.sent_keys, seq = excluded.seq, created_at = excluded.created_at,
    last_sent_at = excluded.last_sent_at;

-- name: alert_group_delete
-- :items, JSON [{receiver, group_key}].
DELETE FROM alert_groups g USING jsonb_to_recordset(CAST(:items AS jsonb)) AS i(receiver text, group_key text)
WHERE g.receiver = i.receiver AND g.group_key = i.group_key;

-- ---------------------------------------------------------------- what the rules read

-- name: alert_dead
-- Dead-letterings (the failure history's `dead` rows: they survive a resurrect) within the last :window_s,
-- grouped by :by (fingerprint | reason | all), of the reasons :reasons (JSON codes, null: any) and queues
-- :queues (JSON, null: any), never of :skip_queue (the alert deliveries' own queue: a dead delivery must
-- not page through the receiver that failed it). Groups with at least :threshold rows.
SELECT CASE CAST(:by AS text) WHEN 'fingerprint' THEN coalesce(d.fingerprint, '-')
                              WHEN 'reason' THEN coalesce(r.name, 'reason ' || d.failure_reason) ELSE '' END AS key,
       count(*) AS n, max(d.error_line) AS sample, string_agg(DISTINCT d.queue, ',') AS queues,
       string_agg(DISTINCT d.type, ',') AS types, count(DISTINCT d.worker_id) AS workers,
       min(d.failed_at) AS first_at, max(d.failed_at) AS last_at
FROM job_failures d LEFT JOIN failure_reasons r ON r.code = d.failure_reason
WHERE d.outcome = 'dead' AND d.failed_at >= now() - make_interval(secs => CAST(:window_s AS double precision))
  AND (CAST(:reasons AS jsonb) IS NULL
       OR d.failure_reason IN (SELECT CAST(jsonb_array_elements_text(CAST(:reasons AS jsonb)) AS smallint)))
  AND (CAST(:queues AS jsonb) IS NULL OR d.queue IN (SELECT jsonb_array_elements_text(CAST(:queues AS jsonb))))
  AND d.queue <> CAST(:skip_queue AS text)
GROUP BY 1
HAVING count(*) >= CAST(:threshold AS double precision)
ORDER BY 1;

-- name: alert_plans_halted
-- Plans whose latest lifecycle audit row is `plan_halt` (a paced run's canary or failure guard stopped
-- it) and that are still ready or running: resumed, finished or discarded plans are no longer halted.
SELECT p.id AS plan_id, p.action, p.actor, p.label, p.total, p.done, a.at AS halted_at, a.actor AS halted_by,
       a.details
FROM plans p JOIN LATERAL (
    SELECT x.action, x.at, x.actor, x.details FROM audit_log x
    WHERE x.plan_id = p.id AND x.action IN ('plan_start', 'plan_resume', 'plan_halt', 'plan_interrupt',
                                            'plan_finish', 'plan_discard')
    ORDER BY x.id DESC LIMIT 1
) a ON true
WHERE p.state IN ('ready', 'running') AND a.action = 'plan_halt'
ORDER BY p.id;
