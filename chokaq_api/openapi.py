"""The OpenAPI document, generated from the app (never hand-edited).

    python -m chokaq_api.openapi openapi.yaml
    flask --app chokaq_api.wsgi openapi write --format=yaml openapi.yaml   # the same bytes

Both dump `api.spec.to_dict()` with PyYAML's defaults (sorted keys), so the output is deterministic and
independent of the local configuration; tests/api/test_openapi.py fails when the committed file drifts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from chokaq_ops.settings import Settings


def spec_dict(app: Any = None) -> dict[str, Any]:
    if app is None:
        from chokaq_api.app import create_app

        app = create_app(Settings())  # the store is never opened: the spec needs no database
    api = app.extensions["flask-smorest"]["apis"][""]["ext_obj"]
    return api.spec.to_dict()


def spec_yaml(app: Any = None) -> str:
    return yaml.dump(spec_dict(app))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else Path("openapi.yaml")
    target.write_text(spec_yaml(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
