"""Canonical JSON (RFC 8785) and the digests derived from it.

Anything stead hashes (request digests, effect ids, tool arguments) goes through
``canonical_json`` so the same value always has the same bytes, whatever the key order
or float spelling a model or a Python dict happened to produce.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

JSON = Any
"""A JSON-compatible value (dict, list, str, int, float, bool, None)."""


def canonical_json(value: JSON) -> str:
    """Return the RFC 8785 canonical text of ``value``.

    Raises ``ValueError`` for values JSON cannot carry (NaN, non-str keys, sets...).
    """
    try:
        return rfc8785.dumps(value).decode("utf-8")
    except (rfc8785.CanonicalizationError, TypeError) as exc:
        raise ValueError(f"value is not canonicalisable JSON: {exc}") from exc


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest(value: JSON) -> str:
    """sha256 (hex) of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def idempotency_key(run_id: str, tool_call_id: str) -> str:
    """``sha256(run_id + tool_call_id)`` in hex, exactly as DESIGN.md fixes it.

    Stable across processes and attempts, so a retried idempotent write carries the same key
    and the service on the other end can deduplicate it.
    """
    return sha256_hex(run_id + tool_call_id)


def effect_id(run_id: str, step: int, call_id: str, attempt: int) -> str:
    """Deterministic id of one attempt of one effect (a model call or a tool call)."""
    return digest(["effect", run_id, step, call_id, attempt])[:32]


def command_id(verb: str, effect: str) -> str:
    """Deterministic id of a command (start, settle, recover) acting on one effect.

    Derived, not random, so applying the same command twice is recognisably the same command
    and the first commit wins.
    """
    return digest(["command", verb, effect])[:32]
