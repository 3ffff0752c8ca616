"""Real `chokaq worker` / `chokaq rescue` processes for the crash tests, with shortened timeouts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.cli import record
from tests.support.polling import wait_for  # noqa: F401 (the crash tests import it from here)

TESTS_DIR = Path(__file__).resolve().parent.parent
CHOKAQ = str(Path(sys.executable).with_name("chokaq"))

# Heartbeat 0.2-0.3 s, zombie and fetched timeouts 2 s, a sweep every 0.5 s (docs/configuration.md: a zombie
# timeout must exceed 3 x the heartbeat maximum, so 2 s is comfortably legal).
FAST = {
    "Execution": {"HeartbeatIntervalMin": "200ms", "HeartbeatIntervalMax": "300ms"},
    "Recovery": {"FetchedJobTimeout": "2s", "ProcessingZombieTimeout": "2s", "ScanInterval": "500ms"},
    "Worker": {"PollingInterval": "100ms", "ShutdownGracePeriod": "10s"},
    "Retry": {"BaseDelay": "50ms", "MaxDelay": "100ms", "JitterMaxDelay": "0s"},
}


def write_config(
    path: Path, base: Mapping[str, Mapping[str, Any]] = FAST, **sections: Mapping[str, Any]
) -> Path:
    """A TOML file: `base` with `sections` merged over it, e.g. Recovery={"ScanInterval": "1s"}."""
    merged = {name: dict(values) for name, values in base.items()}
    for name, values in sections.items():
        merged.setdefault(name, {}).update(values)
    lines: list[str] = []
    for name, values in merged.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {_toml(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorkerProc:
    """One `chokaq worker` subprocess; its output goes to a log file the test can read."""

    def __init__(
        self,
        url: str,
        config: Path,
        workdir: Path,
        name: str,
        *,
        concurrency: int = 4,
        handlers: str = "crash.handlers_crash",
        metrics_port: int | None = None,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        extra_args: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.log_path = workdir / f"worker-{name}.log"
        self.metrics_port = metrics_port
        cmd = [*prefix, CHOKAQ, "--log-level", "INFO", "worker", "--db", url, "--config", str(config)]
        cmd += ["--handlers", handlers, "--concurrency", str(concurrency)]
        if metrics_port is not None:
            cmd += ["--metrics-port", str(metrics_port)]
        cmd += list(extra_args)
        full_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])),
            "CHOKAQ_TEST_DIR": str(workdir),
            "CHOKAQ_WORKER__WORKER_ID": name,
            **(env or {}),
        }
        full_env.pop("CHOKAQ_CONFIG", None)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=full_env, cwd=workdir
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def tcp_ports(self) -> set[int]:
        """The local ports of the process's TCP sockets (its database connections), from /proc: its
        socket descriptors' inodes looked up in the TCP tables."""
        inodes = set()
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{self.pid}/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        ports = set()
        for table in ("tcp", "tcp6"):
            with open(f"/proc/{self.pid}/net/{table}", encoding="ascii") as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if cols[9] in inodes:
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
        return ports

    def kill(self) -> None:
        """SIGKILL: no handler, no cleanup, no last words."""
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """The worker's Prometheus metrics: `name{labels}` -> value; label sets also summed by bare name."""
        assert self.metrics_port is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
            bare = key.split("{", 1)[0]
            if bare != key:
                out[bare] = out.get(bare, 0.0) + float(value)
        return out


def run_rescue(url: str, config: Path, workdir: Path, env: Mapping[str, str] | None = None) -> dict[str, int]:
    """`chokaq rescue --format json` as its own process."""
    out = subprocess.run(
        [CHOKAQ, "rescue", "--db", url, "--config", str(config), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workdir,
        env={**os.environ, **(env or {})},
    )
    assert out.returncode == 0, out.stderr
    return record(out.stdout)  # its one record line (docs/cli-json.md)


def executions(workdir: Path) -> list[tuple[str, str, int, int]]:
    """Every recorded handler event: (event, job id, attempt, pid)."""
    rows = []
    for path in workdir.glob("exec-*.log"):
        for line in path.read_text().splitlines():
            event, job_id, attempt, pid = line.split()
            rows.append((event, job_id, int(attempt), int(pid)))
    return rows


def starts(workdir: Path) -> Counter[str]:
    return Counter(job_id for event, job_id, _, _ in executions(workdir) if event == "start")
