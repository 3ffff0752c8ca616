"""`chokaq_api.wsgi:app` for WSGI servers (gunicorn, waitress-serve, uWSGI): the API alone.

Settings come from the usual sources (CHOKAQ_CONFIG / ./chokaq.toml, CHOKAQ_* variables, CHOKAQ_DB). No
engine starts here: run workers with `chokaq worker` processes, so N server processes never mean N
workers, N sweeps and N retention jobs. The schema must be current (`chokaq migrate`); the app does not
migrate on import.

    gunicorn -w 4 --threads 8 -b 0.0.0.0:8080 'chokaq_api.wsgi:app'
"""

from __future__ import annotations

from chokaq_api.app import create_app
from chokaq_ops.settings import load_settings

app = create_app(load_settings())
