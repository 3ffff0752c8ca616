from __future__ import annotations

from chokaq_api.resources.schedules.resources import URL, blp

__all__ = ["URL", "blp"]
