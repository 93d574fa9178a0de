"""The one rule for an executor queue's name, for a tool's ``queue=`` and an Agent's
``model_queue=`` alike: both name what ``stead executor --queues a,b`` serves."""

from __future__ import annotations

import re

from stead.errors import UserError

_QUEUE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""1-64 letters, digits, '_' or '-': no comma (``--queues`` splits on it), no space, and a
name that fits a PostgreSQL notice channel's key."""


def check_queue(queue: object, what: str) -> None:
    """``UserError`` naming ``what`` unless ``queue`` is None or a queue name."""
    if queue is not None and (not isinstance(queue, str) or not _QUEUE.match(queue)):
        raise UserError(
            f"{what}: queue must be 1-64 letters, digits, '_' or '-' (or None), not {queue!r}"
        )
