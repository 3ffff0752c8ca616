-- Named queries of the alerts (docs/alerts.md), SQLite. Format: see chokaq_ops/storage/queries.py;
-- loaded with queries.sql into the store's queries (storage/database.py). Writers run in BEGIN IMMEDIATE.

-- fragment: now
strftime('%Y-%m-%d %H:%M:%f', 'now')

-- ---------------------------------------------------------------- receivers and rules (audited by the caller's transaction)

-- name: alert_receivers_list
SELECT name, kind, url, secret, send_resolved, timeout_s, max_alerts, created_at, created_by, updated_at,
       updated_by
FROM alert_receivers ORDER BY name;

-- name: alert_receiver_lock
-- One receiver (the transaction's writer lock already keeps it as read until the update).
SELECT name, kind, url, secret, send_resolved, timeout_s, max_alerts, created_at, created_by, updated_at,
       updated_by
FROM alert_receivers WHERE name = :name;

-- name: alert_receiver_insert
INSERT INTO alert_receivers (name, kind, url, secret, send_resolved, timeout_s, max_alerts, created_by, updated_by)
VALUES (:name, :kind, :url, :secret, :send_resolved, :timeout_s, :max_alerts, :actor, :actor)
ON CONFLICT DO NOTHING
RETURNING name;

-- name: alert_receiver_write
UPDATE alert_receivers SET kind = :kind, url = :url, secret = :secret, send_resolved = :send_resolved,
    timeout_s = :timeout_s, max_alerts = :max_alerts, updated_at = {{now}}, updated_by = :actor
WHERE name = :name
RETURNING name;

-- name: alert_receiver_delete
DELETE FROM alert_receivers WHERE name = :name RETURNING name;

-- name: alert_rules_list
SELECT name, kind, receivers, severity, threshold, window_s, for_s, repeat_interval_s, group_by, queues, by_label,
       inhibited_by, inhibit_equal, enabled, created_at, created_by, updated_at, updated_by
FROM alert_rules ORDER BY name;

-- name: alert_rule_lock
SELECT name, kind, receivers, severity, threshold, window_s, for_s, repeat_interval_s, group_by, queues, by_label,
       inhibited_by, inhibit_equal, enabled, created_at, created_by, updated_at, updated_by
FROM alert_rules WHERE name = :name;

-- name: alert_rule_insert
INSERT INTO alert_rules (name, kind, receivers, severity, threshold, window_s, for_s, repeat_interval_s, group_by,
                         queues, by_label, inhibited_by, inhibit_equal, enabled, created_by, updated_by)
VALUES (:name, :kind, :receivers, :severity, :threshold, :window_s, :for_s, :repeat_interval_s, :group_by,
        :queues, :by_label, :inhibited_by, :inhibit_equal, :enabled, :actor, :actor)
ON CONFLICT DO NOTHING
RETURNING name;

-- name: alert_rule_write
UPDATE alert_rules SET kind = :kind, receivers = :receivers, severity = :severity, threshold = :threshold,
    window_s = :window_s, for_s = :for_s, repeat_interval_s = :repeat_interval_s, group_by = :group_by,
    queues = :queues, by_label = :by_label, inhibited_by = :inhibited_by, inhibit_equal = :inhibit_equal,
    enabled = :enabled, updated_at = {{now}}, updated_by = :actor
WHERE name = :name
RETURNING name;

-- name: alert_rule_delete
DELETE FROM alert_rules WHERE name = :name RETURNING name;

-- ---------------------------------------------------------------- the rule loop's state

-- name: alert_states
SELECT rule, alert_key, labels, annotations, value, status, active_at, firing_at, resolved_at
FROM alert_state ORDER BY rule, alert_key;

-- name: alert_state_upsert
-- :items, JSON [{rule, alert_key, labels, annotations, value, status, active_at, firing_at, resolved_at}].
INSERT INTO alert_state (rule, alert_key, labels, annotations, value, status, active_at, firing_at,
                         resolved_at, updated_at)
SELECT json_extract(j.value, '$.rule'), json_extract(j.value, '$.alert_key'), json_extract(j.value, '$.labels'),
       json_extract(j.value, '$.annotations'), json_extract(j.value, '$.value'), json_extract(j.value, '$.status'),
       json_extract(j.value, '$.active_at'), json_extract(j.value, '$.firing_at'),
       json_extract(j.value, '$.resolved_at'), {{now}}
FROM json_each(:items) j WHERE true
ON CONFLICT (rule, alert_key) DO UPDATE SET labels = excluded.labels, annotations = excluded.annotations,
    value = excluded.value, status = excluded.status, active_at = excluded.active_at,
    firing_at = excluded.firing_at, resolved_at = excluded.resolved_at, updated_at = excluded.updated_at;

-- name: alert_state_delete
DELETE FROM alert_state
WHERE EXISTS (SELECT 1 FROM json_each(:items) j WHERE json_extract(j.value, '$.rule') = alert_state.rule
                                                  AND json_extract(j.value, '$.alert_key') = alert_state.alert_key);

-- name: alert_groups_list
SELECT receiver, group_key, rule, group_labels, sent_keys, seq, created_at, last_sent_at
FROM alert_groups ORDER BY receiver, group_key;

-- name: alert_group_upsert
INSERT INTO alert_groups (receiver, group_key, rule, group_labels, sent_keys, seq, created_at, last_sent_at)
SELECT json_extract(j.value, '$.receiver'), json_extract(j.value, '$.group_key'), json_extract(j.value, '$.rule'),
       json_extract(j.value, '$.group_labels'), json_extract(j.value, '$.sent_keys'), json_extract(j.value, '$.seq'),
       json_extract(j.value, '$.created_at'), json_extract(j.value, '$.last_sent_at')
FROM json_each(:items) j WHERE true
ON CONFLICT (receiver, group_key) DO UPDATE SET rule = excluded.rule, group_labels = excluded.group_labels,
    sent_keys = excluded.sent_keys, seq = excluded.seq, created_at = excluded.created_at,
    last_sent_at = excluded.last_sent_at;

-- name: alert_group_delete
DELETE FROM alert_groups
WHERE EXISTS (SELECT 1 FROM json_each(:items) j WHERE json_extract(j.value, '$.receiver') = alert_groups.receiver
                                                  AND json_extract(j.value, '$.group_key') = alert_groups.group_key);

-- ---------------------------------------------------------------- what the rules read

-- name: alert_dead
-- Dead-letterings within the last :window_s grouped by :by (see the PostgreSQL file).
SELECT CASE :by WHEN 'fingerprint' THEN coalesce(d.fingerprint, '-')
                WHEN 'reason' THEN coalesce(r.name, 'reason ' || d.failure_reason) ELSE '' END AS key,
       count(*) AS n, max(d.error_line) AS sample, group_concat(DISTINCT d.queue) AS queues,
       group_concat(DISTINCT d.type) AS types, count(DISTINCT d.worker_id) AS workers,
       min(d.failed_at) AS first_at, max(d.failed_at) AS last_at
FROM job_failures d LEFT JOIN failure_reasons r ON r.code = d.failure_reason
WHERE d.outcome = 'dead' AND d.failed_at >= strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || :window_s || ' seconds')
  AND (:reasons IS NULL OR d.failure_reason IN (SELECT value FROM json_each(:reasons)))
  AND (:queues IS NULL OR d.queue IN (SELECT value FROM json_each(:queues)))
  AND d.queue <> :skip_queue
GROUP BY 1
HAVING count(*) >= :threshold
ORDER BY 1;

-- name: alert_plans_halted
-- Plans whose latest lifecycle audit row is `plan_halt` and that are still ready or running.
SELECT p.id AS plan_id, p.action, p.actor, p.label, p.total, p.done, a.at AS halted_at, a.actor AS halted_by,
       a.details
FROM plans p JOIN audit_log a ON a.id = (
    SELECT x.id FROM audit_log x
    WHERE x.plan_id = p.id AND x.action IN ('plan_start', 'plan_resume', 'plan_halt', 'plan_interrupt',
                                            'plan_finish', 'plan_discard')
    ORDER BY x.id DESC LIMIT 1)
WHERE p.state IN ('ready', 'running') AND a.action = 'plan_halt'
ORDER BY p.id;
