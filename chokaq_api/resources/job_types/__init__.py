from __future__ import annotations

from chokaq_api.resources.job_types.resources import URL, blp

__all__ = ["URL", "blp"]
