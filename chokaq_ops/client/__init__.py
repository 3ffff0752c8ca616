"""`connect()`: one client over a database URL or the REST API, with the same methods on both.

import chokaq_ops
client = chokaq_ops.connect("postgresql://ops@db/chokaq", actor="alice")   # straight to the database
client = chokaq_ops.connect("https://chokaq.internal", token="chq_...")      # through the API
client = chokaq_ops.connect()      # CHOKAQ_API_URL + CHOKAQ_API_TOKEN, else CHOKAQ_DB / the config file
"""

from __future__ import annotations

import os
from typing import Any

from chokaq_ops import errors
from chokaq_ops.client.db import DbClient
from chokaq_ops.client.http import HttpClient

__all__ = ["DbClient", "HttpClient", "connect"]

API_URL_ENV = "CHOKAQ_API_URL"
API_TOKEN_ENV = "CHOKAQ_API_TOKEN"


def connect(
    target: Any = None, token: str | None = None, *, actor: str | None = None
) -> DbClient | HttpClient:
    """A client for `target`.

    Parameters
    ----------
    target : str, Store or None
        ``http(s)://host[:port]`` (the API; ``/api/v1`` is added when missing), a database URL
        (``sqlite:///path``, ``postgresql://...``) or an open Store. None reads the environment:
        CHOKAQ_API_URL (with CHOKAQ_API_TOKEN), else the database of CHOKAQ_DB / CHOKAQ_CONFIG / chokaq.toml.
    token : str, optional
        The API bearer token (default CHOKAQ_API_TOKEN). The API records the token's name as the actor.
    actor : str, optional
        Database clients only: the name audit rows carry for changes (default CHOKAQ_ACTOR). Reads need
        none; a change without one is refused with a clear error.

    Returns
    -------
    DbClient or HttpClient
        Both have the same methods: ``load_dlq / load_archive / load_hot / iter_dlq`` (DataFrames),
        ``get_job``, ``preview``, ``summary``, ``resurrect``, ``purge``, ``purge_archive``, ``cancel``,
        ``edit``, ``queues``, ``pause``, ``resume``, ``set_queue``, ``stats``, ``audit``, plans
        (``plan_resurrect``, ``plan_purge``, ``plan_cancel``, ``plan``, ``plans``), schedules
        (``schedule_rows``, ``schedule``, ``schedule_run_rows``, ``create_schedule``, ``pause_schedule``,
        ``resume_schedule``, ``trigger_schedule``, ``delete_schedule``) and alerts (``alert_rows``,
        ``alert_receiver_rows``, ``alert_rule_rows``, ``create_|update_|delete_alert_receiver``,
        ``create_|update_|delete_alert_rule``, ``send_alert_test``).
    """
    if target is None:
        target = os.environ.get(API_URL_ENV) or None
        if target is None:
            from chokaq_ops.settings import load_settings

            settings = load_settings(env=os.environ)
            return DbClient(settings.storage.url, actor=actor, settings=settings)
    if isinstance(target, str) and target.lower().startswith(("http://", "https://")):
        if actor is not None:
            raise errors.ValidationError(
                "over the API the actor is the token's name; drop actor= or connect to the database",
                field="actor",
            )
        return HttpClient(target, token or os.environ.get(API_TOKEN_ENV))
    if isinstance(target, str):
        from chokaq_ops.settings import load_settings

        settings = load_settings(env=os.environ, overrides={"storage.url": target})
        return DbClient(target, actor=actor, settings=settings)
    from chokaq_ops.storage import Store

    if isinstance(target, Store):
        return DbClient(target, actor=actor)
    raise errors.ValidationError(
        f"connect() takes a database URL, an http(s):// API URL or a Store, not {type(target).__name__}",
        field="target",
    )
