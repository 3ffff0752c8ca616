"""What the Flask extension keeps per application: the settings read from its `CHOKAQ_*` configuration
keys, the store and client made from them on first use, and the application's own connection."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chokaq_api.extensions import Context
from chokaq_ops.settings import Settings, load_settings

if TYPE_CHECKING:
    from chokaq_ops.client.db import DbClient

# Keys of the extension itself, not settings: where the TOML file is, and who enqueued jobs are by.
FILE_KEY = "CHOKAQ_CONFIG"
ACTOR_KEY = "CHOKAQ_ACTOR"


def settings_from_config(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
    """Settings for an application: defaults < the TOML file (`CHOKAQ_CONFIG` in the app's config, else in
    the environment, else ./chokaq.toml) < `CHOKAQ_*` environment variables < the app's own `CHOKAQ_*`
    keys, with the environment's spelling (`CHOKAQ_DB`, `CHOKAQ_WORKER__CONCURRENCY = 4`,
    `CHOKAQ_SCHEDULES__CHECK_INTERVAL = "500ms"`) or as tables (`CHOKAQ_WORKER = {"CONCURRENCY": 4}`,
    which is what Flask's `from_prefixed_env` makes of `FLASK_CHOKAQ_WORKER__CONCURRENCY`). Values may be
    typed (ints, bools, lists). Validated: a bad value raises ConfigError naming the key."""
    environ = os.environ if environ is None else environ
    keys: dict[str, Any] = {}
    for key, value in config.items():
        if not key.upper().startswith("CHOKAQ_") or key.upper() == FILE_KEY:
            continue
        if isinstance(value, Mapping):
            keys.update(_flat(key, value))
        else:
            keys[key] = value
    merged: dict[str, Any] = {**{k: v for k, v in environ.items() if k.upper() != FILE_KEY}, **keys}
    path = config.get(FILE_KEY) or environ.get(FILE_KEY) or None
    return load_settings(path, env=merged)


def _flat(prefix: str, table: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}__{key}"
        out.update(_flat(name, value) if isinstance(value, Mapping) else {name: value})
    return out


@dataclass
class FlaskState(Context):
    """The API's per-app context (chokaq_api/extensions.py: the mounted API's views read it) plus what
    the extension adds. The store opens its first connection on first use, so an app made before a
    server forks (gunicorn --preload) holds no connection across the fork."""

    actor: str | None = None
    connection: Callable[[], Any] | None = None
    _client: DbClient | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def client(self) -> DbClient:
        """The toolkit client over the app's store (enqueue, and every read of chokaq_ops.connect)."""
        with self._lock:
            if self._client is None:
                from chokaq_ops.client.db import DbClient

                self._client = DbClient(self.store, actor=self.actor, settings=self.settings)
            return self._client
