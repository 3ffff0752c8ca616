import dataclasses
import pickle
from types import MappingProxyType

import pytest

from chokaq_ops import errors
from chokaq_ops.settings import (
    QueueSettings,
    RecoverySettings,
    Settings,
    load_settings,
    parse_duration,
)


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path, monkeypatch):
    # load_settings falls back to ./chokaq.toml; a stray one in the checkout must not leak into tests.
    monkeypatch.chdir(tmp_path)


def write(tmp_path, text, name="chokaq.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(**kwargs) -> errors.ConfigError:
    with pytest.raises(errors.ConfigError) as info:
        load_settings(env=kwargs.pop("env", {}), **kwargs)
    return info.value


# ------------------------------------------------------------------------------------------ defaults


def test_defaults():
    s = load_settings(env={})
    assert s.storage.url == "sqlite:///./chokaq.db"
    assert (s.storage.cleanup_batch_size, s.storage.max_transient_retries, s.storage.pool_size) == (
        1000,
        3,
        16,
    )
    assert (s.storage.transient_retry_base_delay, s.storage.command_timeout) == (0.2, 30.0)
    assert s.recovery == RecoverySettings(600.0, 600.0, 60.0, True)
    assert (s.execution.default_timeout, s.execution.heartbeat_interval_min) == (900.0, 8.0)
    assert (s.execution.heartbeat_interval_max, s.execution.heartbeat_failure_threshold) == (12.0, 10)
    assert s.execution.cancel_on_heartbeat_failure is False
    assert (s.retry.max_attempts, s.retry.base_delay, s.retry.max_delay) == (3, 3.0, 3600.0)
    assert (s.retry.backoff_multiplier, s.retry.jitter_max_delay, s.retry.max_job_age) == (2.0, 1.0, 86400.0)
    assert (s.worker.handlers, s.worker.queues, s.worker.worker_id) == ((), (), None)
    assert (s.worker.concurrency, s.worker.prefetch, s.worker.fetch_batch_size) == (10, 100, 20)
    assert (s.worker.polling_interval, s.worker.no_queues_sleep_interval) == (1.0, 5.0)
    assert s.worker.shutdown_grace_period == 30.0
    assert (s.retention.archive, s.retention.dlq) == (30 * 86400.0, None)
    assert (s.retention.metric_buckets, s.retention.interval) == (7 * 86400.0, 3600.0)
    assert (s.health.worker_heartbeat_timeout, s.health.queue_lag_degraded) == (30.0, 5.0)
    assert s.health.queue_lag_unhealthy == 10.0
    assert (s.api.host, s.api.port, s.api.max_body_bytes, s.api.metrics_open) == (
        "127.0.0.1",
        8080,
        2_000_000,
        False,
    )
    assert s.api.threads == 8
    assert s.serialization.max_payload_bytes == 1_000_000
    assert dict(s.queues) == {}
    assert s == Settings()


def test_durations_are_stored_as_float_seconds():
    s = load_settings(env={"CHOKAQ_RECOVERY__SCAN_INTERVAL": "2m"}, overrides={"storage.command_timeout": 5})
    assert type(s.recovery.scan_interval) is float and s.recovery.scan_interval == 120.0
    assert type(s.storage.command_timeout) is float


# ------------------------------------------------------------------------------------------ sources


def test_toml_canonical_keys_any_spelling(tmp_path):
    path = write(
        tmp_path,
        """
        [Storage]
        Url = "postgresql://db/chokaq"
        cleanup_batch_size = 500
        [Recovery]
        FetchedJobTimeout = "00:05:00"
        processing-zombie-timeout = "15m"
        SCAN_INTERVAL = 30
        Lease = false
        [Execution]
        CancelOnHeartbeatFailure = true
        [Retry]
        MaxAttempts = 5
        BackoffMultiplier = 1.5
        [Worker]
        Handlers = ["app.jobs", "app.more"]
        Queues = "sms, email"
        WorkerId = "w1"
        """,
        name="custom.toml",
    )
    s = load_settings(path, env={})
    assert s.storage.url == "postgresql://db/chokaq"
    assert s.storage.cleanup_batch_size == 500
    assert s.recovery == RecoverySettings(300.0, 900.0, 30.0, False)
    assert s.execution.cancel_on_heartbeat_failure is True
    assert (s.retry.max_attempts, s.retry.backoff_multiplier) == (5, 1.5)
    assert s.worker.handlers == ("app.jobs", "app.more")
    assert s.worker.queues == ("sms", "email")
    assert s.worker.worker_id == "w1"


def test_chokaq_wrapper_table_is_accepted(tmp_path):
    path = write(tmp_path, '[chokaq.Recovery]\nScanInterval = "45s"\n[ChokaQ]\nDatabase = "sqlite:///w.db"\n')
    s = load_settings(path, env={})
    assert s.recovery.scan_interval == 45.0
    assert s.storage.url == "sqlite:///w.db"


def test_default_file_and_chokaq_config(tmp_path):
    write(tmp_path, "[Worker]\nConcurrency = 3\n")
    assert load_settings(env={}).worker.concurrency == 3
    other = write(tmp_path, "[Worker]\nConcurrency = 4\n", name="other.toml")
    assert load_settings(env={"CHOKAQ_CONFIG": str(other)}).worker.concurrency == 4
    assert load_settings(other, env={"CHOKAQ_CONFIG": "nope.toml"}).worker.concurrency == 4


@pytest.mark.parametrize("how", ["argument", "env"])
def test_missing_config_file_names_the_path(tmp_path, how):
    missing = str(tmp_path / "missing.toml")
    if how == "argument":
        err = config_error(config_file=missing)
    else:
        err = config_error(env={"CHOKAQ_CONFIG": missing})
    assert missing in str(err)


def test_bad_toml_names_the_file(tmp_path):
    path = write(tmp_path, "[Recovery\n")
    assert str(path) in str(config_error(config_file=path))


def test_env_overrides_file(tmp_path):
    path = write(tmp_path, '[Recovery]\nScanInterval = "10m"\n[Worker]\nConcurrency = 3\n')
    s = load_settings(path, env={"CHOKAQ_RECOVERY__SCAN_INTERVAL": "30s", "CHOKAQ_WORKER__HANDLERS": "a, b"})
    assert s.recovery.scan_interval == 30.0
    assert s.worker.concurrency == 3  # untouched by env
    assert s.worker.handlers == ("a", "b")


def test_flags_override_env_and_none_flags_are_ignored(tmp_path):
    path = write(tmp_path, '[Storage]\nUrl = "sqlite:///file.db"\n')
    env = {"CHOKAQ_STORAGE__URL": "sqlite:///env.db", "CHOKAQ_WORKER__CONCURRENCY": "7"}
    overrides = {"storage.url": "sqlite:///flag.db", "worker.concurrency": None, "Worker.Handlers": "x,y"}
    s = load_settings(path, env=env, overrides=overrides)
    assert s.storage.url == "sqlite:///flag.db"
    assert s.worker.concurrency == 7
    assert s.worker.handlers == ("x", "y")


def test_unrelated_chokaq_env_vars_are_ignored():
    env = {
        "CHOKAQ_API_URL": "http://x",
        "CHOKAQ_API_TOKEN": "secret",
        "CHOKAQ_TEST_PG": "postgresql://x",
        "CHOKAQ_TEST__THING": "1",
        "CHOKAQ_CONFIG": "",
        "PATH": "/bin",
    }
    assert load_settings(env=env) == Settings()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(word, True) for word in ("true", "1", "YES", "on")]
    + [(word, False) for word in ("false", "0", "no", "Off")],
)
def test_booleans_from_env(value, expected):
    s = load_settings(env={"CHOKAQ_EXECUTION__CANCEL_ON_HEARTBEAT_FAILURE": value})
    assert s.execution.cancel_on_heartbeat_failure is expected
    s = load_settings(env={"CHOKAQ_API__METRICS_OPEN": value})
    assert s.api.metrics_open is expected


@pytest.mark.parametrize("value", ["8.5", "eight", "", "1e3"])
def test_ints_are_strict(value):
    err = config_error(env={"CHOKAQ_WORKER__CONCURRENCY": value})
    assert err.field == "Worker.Concurrency"
    assert "CHOKAQ_WORKER__CONCURRENCY" in str(err)


@pytest.mark.parametrize("value", [8.0, True])
def test_ints_reject_floats_and_bools(value):
    assert config_error(overrides={"worker.concurrency": value}).field == "Worker.Concurrency"


def test_bad_bool_names_the_key():
    err = config_error(env={"CHOKAQ_RECOVERY__LEASE": "maybe"})
    assert err.field == "Recovery.Lease" and "'maybe'" in str(err)


@pytest.mark.parametrize("word", ["none", "NULL", "off", ""])
def test_optional_durations_can_be_disabled(word):
    env = {"CHOKAQ_RETRY__MAX_JOB_AGE": word, "CHOKAQ_RETENTION__ARCHIVE": word}
    s = load_settings(env=env, overrides={"retention.dlq": "30d"})
    assert s.retry.max_job_age is None and s.retention.archive is None
    assert s.retention.dlq == 30 * 86400.0
    assert (
        load_settings(env={}, overrides={"retention.dlq": "30d"})
        .with_overrides({"retention.dlq": word})
        .retention.dlq
        is None
    )


# ------------------------------------------------------------------------------------------ durations


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (90, 90.0),
        (1.5, 1.5),
        ("90", 90.0),
        ("1.5", 1.5),
        ("90s", 90.0),
        ("500ms", 0.5),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
        (" 10M ", 600.0),
        ("00:10:00", 600.0),
        ("01:02:03", 3723.0),
        ("00:00:01.250", 1.25),
        ("1.00:00:00", 86400.0),
        ("2.01:00:30", 2 * 86400.0 + 3630.0),
    ],
)
def test_parse_duration_forms(value, seconds):
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value", ["abc", "10x", "1:61:00", "1.25:00:00", "nan", "", None, True, [1], float("inf")]
)
def test_parse_duration_rejects(value):
    with pytest.raises(errors.ConfigError):
        parse_duration(value)


def test_every_duration_form_reaches_settings(tmp_path):
    path = write(tmp_path, '[Retry]\nBaseDelay = "500ms"\nMaxDelay = "1.00:00:00"\nJitterMaxDelay = 0\n')
    s = load_settings(path, env={"CHOKAQ_RETRY__MAX_JOB_AGE": "2d"})
    assert (s.retry.base_delay, s.retry.max_delay, s.retry.max_job_age) == (0.5, 86400.0, 2 * 86400.0)
    assert s.retry.jitter_max_delay == 0.0


@pytest.mark.parametrize("source", ["file", "env", "flag"])
def test_bad_duration_names_key_and_value(tmp_path, source):
    if source == "file":
        err = config_error(config_file=write(tmp_path, '[Recovery]\nScanInterval = "soon"\n'))
    elif source == "env":
        err = config_error(env={"CHOKAQ_RECOVERY__SCAN_INTERVAL": "soon"})
    else:
        err = config_error(overrides={"recovery.scan_interval": "soon"})
    assert err.field == "Recovery.ScanInterval"
    assert "Recovery.ScanInterval" in str(err) and "'soon'" in str(err)


def test_parse_duration_error_names_the_field():
    with pytest.raises(errors.ConfigError, match="--older-than") as info:
        parse_duration("thirty days", field="--older-than")
    assert info.value.field == "--older-than"


# ------------------------------------------------------------------------------------------ aliases


@pytest.mark.parametrize(
    ("alias", "env_name", "value", "read", "expected"),
    [
        (
            "FetchedJobTimeoutSeconds",
            "CHOKAQ_FETCHED_JOB_TIMEOUT_SECONDS",
            120,
            "recovery.fetched_job_timeout",
            120.0,
        ),
        (
            "ZombieTimeoutSeconds",
            "CHOKAQ_ZOMBIE_TIMEOUT_SECONDS",
            900,
            "recovery.processing_zombie_timeout",
            900.0,
        ),
        ("MaxRetries", "CHOKAQ_MAX_RETRIES", 7, "retry.max_attempts", 7),
        ("RetryDelaySeconds", "CHOKAQ_RETRY_DELAY_SECONDS", 9, "retry.base_delay", 9.0),
        ("Database", "CHOKAQ_DATABASE", "postgres://h/db", "storage.url", "postgres://h/db"),
    ],
)
def test_legacy_aliases_in_file_and_env(tmp_path, alias, env_name, value, read, expected):
    def get(s):
        section, name = read.split(".")
        return getattr(getattr(s, section), name)

    literal = f'"{value}"' if isinstance(value, str) else value
    from_file = load_settings(write(tmp_path, f"{alias} = {literal}\n"), env={})
    from_env = load_settings(env={env_name: str(value)})
    assert get(from_file) == expected
    assert get(from_env) == expected
    assert get(Settings()) != expected


def test_storage_url_aliases(tmp_path):
    assert load_settings(env={"CHOKAQ_DB": "sqlite:///db.db"}).storage.url == "sqlite:///db.db"
    path = write(tmp_path, '[Storage]\nDatabase = "sqlite:///s.db"\n')
    assert load_settings(path, env={}).storage.url == "sqlite:///s.db"


def test_sqlserver_cleanup_batch_size_alias(tmp_path):
    path = write(tmp_path, "[SqlServer]\nCleanupBatchSize = 250\n")
    assert load_settings(path, env={}).storage.cleanup_batch_size == 250
    assert (
        load_settings(env={"CHOKAQ_SQLSERVER__CLEANUP_BATCH_SIZE": "300"}).storage.cleanup_batch_size == 300
    )


def test_canonical_wins_over_alias_in_file(tmp_path):
    # The aliases come last (the [ChokaQ] table is read after bare keys), so "last one wins" would pick them.
    path = write(
        tmp_path,
        """
        [Recovery]
        ProcessingZombieTimeout = "20m"
        [Storage]
        Url = "sqlite:///canon.db"
        CleanupBatchSize = 50
        [SqlServer]
        CleanupBatchSize = 5
        [ChokaQ]
        ZombieTimeoutSeconds = 60
        Database = "sqlite:///alias.db"
        """,
    )
    s = load_settings(path, env={})
    assert s.recovery.processing_zombie_timeout == 1200.0
    assert s.storage.url == "sqlite:///canon.db"
    assert s.storage.cleanup_batch_size == 50


def test_canonical_wins_over_alias_in_env_and_flags():
    env = {
        "CHOKAQ_RECOVERY__PROCESSING_ZOMBIE_TIMEOUT": "20m",
        "CHOKAQ_ZOMBIE_TIMEOUT_SECONDS": "60",
        "CHOKAQ_STORAGE__URL": "sqlite:///canon.db",
        "CHOKAQ_DB": "sqlite:///alias.db",
    }
    s = load_settings(env=env)
    assert s.recovery.processing_zombie_timeout == 1200.0
    assert s.storage.url == "sqlite:///canon.db"
    flags = {"max_retries": 9, "retry.max_attempts": 4}
    assert load_settings(env={}, overrides=flags).retry.max_attempts == 4


def test_alias_in_a_later_source_still_beats_an_earlier_canonical(tmp_path):
    path = write(tmp_path, '[Recovery]\nProcessingZombieTimeout = "20m"\n')
    s = load_settings(path, env={"CHOKAQ_ZOMBIE_TIMEOUT_SECONDS": "900"})
    assert s.recovery.processing_zombie_timeout == 900.0


# ------------------------------------------------------------------------------------------ queues


def test_per_queue_settings_from_toml(tmp_path):
    path = write(tmp_path, '[Queues.sms]\nZombieTimeoutSeconds = 40\nexecution_timeout = "2m"\n')
    s = load_settings(path, env={})
    assert s.queues["sms"] == QueueSettings(zombie_timeout_seconds=40.0, execution_timeout=120.0)
    assert s.zombie_timeout_for("sms") == 40.0
    assert s.zombie_timeout_for("other") == 600.0
    assert s.execution_timeout_for("sms") == 120.0
    assert s.execution_timeout_for("other") == 900.0


def test_per_queue_settings_from_env_fold_onto_file_queue(tmp_path):
    path = write(tmp_path, "[Queues.Reports]\nZombieTimeoutSeconds = 100\n")
    env = {
        "CHOKAQ_QUEUES__SMS__ZOMBIE_TIMEOUT_SECONDS": "30s",
        "CHOKAQ_QUEUES__REPORTS__EXECUTION_TIMEOUT": "1h",
        "CHOKAQ_EXECUTION__HEARTBEAT_INTERVAL_MAX": "9",
        "CHOKAQ_EXECUTION__HEARTBEAT_INTERVAL_MIN": "5",
    }
    s = load_settings(path, env=env)
    assert set(s.queues) == {"sms", "Reports"}
    assert s.queues["sms"].zombie_timeout_seconds == 30.0
    assert s.queues["Reports"] == QueueSettings(100.0, 3600.0)
    assert s.zombie_timeout_for("SMS") == 30.0


def test_per_queue_settings_from_flags():
    s = load_settings(env={}, overrides={"queues.sms.zombie_timeout_seconds": "5m"})
    assert s.zombie_timeout_for("sms") == 300.0


def test_unknown_queue_key_is_rejected(tmp_path):
    err = config_error(config_file=write(tmp_path, "[Queues.sms]\nZombieTimeout = 40\n"))
    assert "Queues.sms.ZombieTimeoutSeconds" in str(err)


# ------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"execution.default_timeout": 0}, "Execution.DefaultTimeout"),
        ({"execution.heartbeat_interval_min": 0}, "Execution.HeartbeatIntervalMin"),
        ({"execution.heartbeat_interval_max": "-1s"}, "Execution.HeartbeatIntervalMax"),
        ({"recovery.fetched_job_timeout": 0}, "Recovery.FetchedJobTimeout"),
        ({"recovery.processing_zombie_timeout": 0}, "Recovery.ProcessingZombieTimeout"),
        ({"recovery.scan_interval": 0}, "Recovery.ScanInterval"),
        ({"retry.base_delay": 0}, "Retry.BaseDelay"),
        ({"retry.max_delay": 0}, "Retry.MaxDelay"),
        ({"worker.polling_interval": 0}, "Worker.PollingInterval"),
        ({"worker.shutdown_grace_period": 0}, "Worker.ShutdownGracePeriod"),
        ({"retention.interval": 0}, "Retention.Interval"),
        ({"health.worker_heartbeat_timeout": 0}, "Health.WorkerHeartbeatTimeout"),
        ({"health.queue_lag_degraded": 0}, "Health.QueueLagDegraded"),
        ({"health.queue_lag_unhealthy": 0}, "Health.QueueLagUnhealthy"),
        ({"execution.heartbeat_interval_min": 13}, "Execution.HeartbeatIntervalMax"),
        ({"execution.heartbeat_failure_threshold": 0}, "Execution.HeartbeatFailureThreshold"),
        ({"retry.max_attempts": 0}, "Retry.MaxAttempts"),
        ({"retry.backoff_multiplier": 0.5}, "Retry.BackoffMultiplier"),
        ({"retry.jitter_max_delay": -1}, "Retry.JitterMaxDelay"),
        ({"retry.base_delay": 10, "retry.max_delay": 5}, "Retry.MaxDelay"),
        ({"retry.max_job_age": 0}, "Retry.MaxJobAge"),
        ({"storage.cleanup_batch_size": 0}, "Storage.CleanupBatchSize"),
        ({"storage.cleanup_batch_size": 100_001}, "Storage.CleanupBatchSize"),
        ({"storage.pool_size": 0}, "Storage.PoolSize"),
        ({"worker.concurrency": 0}, "Worker.Concurrency"),
        ({"worker.concurrency": 1025}, "Worker.Concurrency"),
        ({"worker.prefetch": 10, "worker.fetch_batch_size": 11}, "Worker.Prefetch"),
        ({"worker.fetch_batch_size": 0, "worker.prefetch": 5}, "Worker.FetchBatchSize"),
        ({"serialization.max_payload_bytes": 0}, "Serialization.MaxPayloadBytes"),
        ({"health.queue_lag_degraded": 20}, "Health.QueueLagUnhealthy"),
        ({"storage.url": "mysql://x"}, "Storage.Url"),
        ({"recovery.processing_zombie_timeout": 36}, "Recovery.ProcessingZombieTimeout"),
        ({"queues.sms.zombie_timeout_seconds": 36}, "Queues.sms.ZombieTimeoutSeconds"),
        ({"queues.sms.execution_timeout": 0}, "Queues.sms.ExecutionTimeout"),
        ({"queues. .execution_timeout": 5}, "Queues"),
        ({f"queues.{'q' * 256}.execution_timeout": 5}, "Queues"),
    ],
)
def test_validation_rules_name_the_key(overrides, key):
    err = config_error(overrides=overrides)
    assert err.field == key
    assert key in str(err)


@pytest.mark.parametrize("url", ["sqlite:///x.db", "postgresql://h/db", "postgres://h/db"])
def test_supported_storage_urls(url):
    assert load_settings(env={}, overrides={"storage.url": url}).storage.url == url


@pytest.mark.parametrize("url", ["mssql://h/db", "odbc://dsn"])
def test_sql_server_urls_are_refused_at_start_with_a_reason(url):
    err = config_error(overrides={"storage.url": url})
    assert err.field == "Storage.Url"
    assert "SQL Server is not supported" in str(err)


def test_zombie_rule_message_and_boundary():
    err = config_error(overrides={"recovery.processing_zombie_timeout": 20})
    times = "3 \N{MULTIPLICATION SIGN}"
    assert str(err) == (
        f"Recovery.ProcessingZombieTimeout (20s) must exceed {times} Execution.HeartbeatIntervalMax "
        f"({times} 12s = 36s)"
    )
    # The rule follows the heartbeat maximum, not a fixed number.
    fast = {"execution.heartbeat_interval_min": 1, "execution.heartbeat_interval_max": 2}
    s = load_settings(env={}, overrides={**fast, "recovery.processing_zombie_timeout": 7})
    assert s.recovery.processing_zombie_timeout == 7.0
    assert load_settings(env={}, overrides={**fast, "queues.q.zombie_timeout_seconds": 6.5}).queues["q"]


def test_validate_can_be_called_on_hand_built_settings():
    assert Settings().validate() == Settings()
    bad = Settings(queues={"sms": QueueSettings(zombie_timeout_seconds=10)})
    with pytest.raises(errors.ConfigError) as info:
        bad.validate()
    assert info.value.field == "Queues.sms.ZombieTimeoutSeconds"


# ------------------------------------------------------------------------------------------ typos


@pytest.mark.parametrize("source", ["file", "env", "flag"])
def test_unknown_key_in_known_section_suggests_the_right_one(tmp_path, source):
    if source == "file":
        err = config_error(config_file=write(tmp_path, "[Recovery]\nScanIntervall = 5\n"))
    elif source == "env":
        err = config_error(env={"CHOKAQ_RECOVERY__SCAN_INTERVALL": "5"})
    else:
        err = config_error(overrides={"recovery.scan_intervall": 5})
    assert "did you mean 'Recovery.ScanInterval'" in str(err)
    assert "scan" in err.field.lower()


def test_unknown_section_in_file_is_rejected(tmp_path):
    err = config_error(config_file=write(tmp_path, "[Recovry]\nScanInterval = 5\n"))
    assert "Recovry" in str(err) and "did you mean 'Recovery'" in str(err)


def test_section_must_be_a_table(tmp_path):
    err = config_error(config_file=write(tmp_path, "Recovery = 5\n"))
    assert err.field == "Recovery"


# ------------------------------------------------------------------------------------------ immutability


def test_settings_are_frozen():
    s = load_settings(env={}, overrides={"queues.sms.execution_timeout": 5})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.recovery.scan_interval = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.storage = None
    assert isinstance(s.queues, MappingProxyType)
    with pytest.raises(TypeError):
        s.queues["other"] = QueueSettings()


def test_plain_dict_queues_are_made_immutable():
    source = {"sms": QueueSettings(execution_timeout=5)}
    s = Settings(queues=source)
    source["late"] = QueueSettings()
    assert isinstance(s.queues, MappingProxyType) and "late" not in s.queues


def test_with_overrides_returns_a_validated_copy():
    base = load_settings(env={}, overrides={"worker.concurrency": 4})
    fast = base.with_overrides({"recovery.scan_interval": "1s"}, recovery__fetched_job_timeout=2)
    assert (fast.recovery.scan_interval, fast.recovery.fetched_job_timeout) == (1.0, 2.0)
    assert fast.worker.concurrency == 4
    assert base.recovery.scan_interval == 60.0
    with_queue = fast.with_overrides({"queues.sms.zombie_timeout_seconds": 40})
    assert with_queue.with_overrides(worker__prefetch=50).zombie_timeout_for("sms") == 40.0
    with pytest.raises(errors.ConfigError) as info:
        base.with_overrides({"recovery.processing_zombie_timeout": 1})
    assert info.value.field == "Recovery.ProcessingZombieTimeout"


def test_settings_survive_pickle():
    s = load_settings(env={}, overrides={"queues.sms.zombie_timeout_seconds": 40})
    copy = pickle.loads(pickle.dumps(s))
    assert copy == s
    assert isinstance(copy.queues, MappingProxyType)


def test_an_implicit_chokaq_toml_writable_by_others_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "chokaq.toml"
    path.write_text('[Storage]\nUrl = "sqlite:///./planted.db"\n')
    path.chmod(0o666)  # anyone could have written it
    with pytest.raises(errors.ConfigError, match="writable by group/others"):
        load_settings(env={})
    # Named explicitly, it is the operator's choice.
    assert load_settings(str(path), env={}).storage.url == "sqlite:///./planted.db"
    path.chmod(0o644)
    assert load_settings(env={}).storage.url == "sqlite:///./planted.db"


def test_per_type_circuit_overrides_from_a_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[Circuits."payments.charge.v1"]\nFailureThreshold = 3\nBreakDurationSeconds = 90\n')
    s = load_settings(config_file=path, env={})
    o = s.circuits["payments.charge.v1"]
    assert (o.failure_threshold, o.break_duration, o.failure_window) == (3, 90.0, None)
    path.write_text('[Circuits."x"]\nFailureThreshold = 0\n')
    with pytest.raises(errors.ConfigError, match=r"Circuits\.x\.FailureThreshold"):
        load_settings(config_file=path, env={})
