"""The ``date`` context source: ``Today's date is YYYY-MM-DD.``

The day is the request's ``now`` (the caller's clock, never the system clock) in the
configured ``timezone``: ``"local"`` (the process's zone, what the user's own clock
shows), ``"UTC"`` or an IANA name.  The same ``now`` and zone give the same line.
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo

from .base import SourceRequest

__all__ = ["DateSource", "today"]


def today(now: float, zone: str = "local") -> str:
    """The ISO date (``YYYY-MM-DD``) of epoch seconds ``now`` in ``zone``."""
    tz: tzinfo | None
    if zone == "local":
        tz = None  # astimezone() with no argument converts to the process's zone
    elif zone == "UTC":
        tz = timezone.utc
    else:
        tz = ZoneInfo(zone)
    return datetime.fromtimestamp(now, timezone.utc).astimezone(tz).date().isoformat()


class DateSource:
    """Today's date in the session's time zone, from the request's clock."""

    name = "date"

    def collect(self, request: SourceRequest) -> str | None:
        """``Today's date is YYYY-MM-DD.``, or ``None`` when ``config.date`` is off."""
        if not request.config.date:
            return None
        return f"Today's date is {today(request.now, request.config.timezone)}."
