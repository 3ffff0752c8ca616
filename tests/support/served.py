"""A real `chokaq serve` process for the end-to-end tests: started on a free port, driven over HTTP,
stopped by its pid (SIGTERM, or SIGKILL for crash tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from tests.support.polling import wait_for  # noqa: F401 (the e2e tests import it from here)

REPO = Path(__file__).resolve().parents[2]
CHOKAQ = str(Path(sys.executable).with_name("chokaq"))

# Heartbeat 0.2-0.3 s, zombie and fetched timeouts 2 s (> 3 x heartbeat max), a sweep every 0.5 s.
FAST_TOML = """
[Execution]
HeartbeatIntervalMin = "200ms"
HeartbeatIntervalMax = "300ms"
[Recovery]
FetchedJobTimeout = "2s"
ProcessingZombieTimeout = "2s"
ScanInterval = "500ms"
[Worker]
PollingInterval = "100ms"
ShutdownGracePeriod = "2s"
[Api]
SseKeepalive = "1s"
SsePollInterval = "100ms"
MaxBodyBytes = 100000
"""


class Served:
    def __init__(self, url: str, workdir: Path, name: str, *args: str) -> None:
        config = workdir / "chokaq.toml"
        if not config.exists():
            config.write_text(FAST_TOML)
        self.log_path = workdir / f"serve-{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "CHOKAQ_TEST_DIR": str(workdir),
        }
        env.pop("CHOKAQ_CONFIG", None)
        cmd = [CHOKAQ, "serve", "--db", url, "--config", str(config), "--port", "0", "--threads", "6", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=workdir)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if "serving http://" not in line:
            self.stop()
            raise AssertionError(f"chokaq serve did not start: {line!r}\n{self.log()}")
        self.base = line.split("serving ", 1)[1].split()[0].removesuffix("/api/v1")
        self.session = requests.Session()

    def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> requests.Response:
        headers = kw.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return self.session.request(method, self.base + path, headers=headers, timeout=30, **kw)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no release of its jobs; they stay processing with a heartbeat going stale."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 20) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")


class WorkerProc:
    """A `chokaq worker` process (headless engine) on the same configuration as the served API."""

    def __init__(self, url: str, workdir: Path, name: str, *args: str) -> None:
        config = workdir / "chokaq.toml"
        if not config.exists():
            config.write_text(FAST_TOML)
        self.log_path = workdir / f"worker-{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "CHOKAQ_TEST_DIR": str(workdir),
        }
        env.pop("CHOKAQ_CONFIG", None)
        cmd = [CHOKAQ, "worker", "--db", url, "--config", str(config), "--worker-id", name, *args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=workdir)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()
