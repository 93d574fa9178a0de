"""The pure core: states, events, fold, decide, effects, failures, canonical JSON.

Nothing here does I/O, reads a clock or draws a random number; time, ids and randomness are
passed in. That is what lets every decision be unit- and property-tested without a database.
"""

# The handlers register themselves in ``fold.HANDLERS`` when imported (they depend on fold,
# fold does not depend on them): importing them here, where every import of a ``stead.core``
# module passes first, is what makes ``apply`` complete.
from stead.core import handlers as _handlers  # noqa: F401
from stead.core.canonical import canonical_json, digest, idempotency_key
from stead.core.event_codec import decode, encode
from stead.core.events import Event
from stead.core.fold import RunState, apply, fold
from stead.core.states import TRANSITIONS, RunStatus, check_transition

__all__ = [
    "TRANSITIONS",
    "Event",
    "RunState",
    "RunStatus",
    "apply",
    "canonical_json",
    "check_transition",
    "decode",
    "digest",
    "encode",
    "fold",
    "idempotency_key",
]
