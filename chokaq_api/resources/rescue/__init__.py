from __future__ import annotations

from chokaq_api.resources.rescue.resources import URL, blp

__all__ = ["URL", "blp"]
