from __future__ import annotations

from chokaq_api.resources.horizon.resources import URL, blp

__all__ = ["URL", "blp"]
