"""Large tool results stored by reference: the text of a result past
``Limits.result_by_reference`` characters is stored once, under its sha256, beside the log
(as an attachment's bytes are), and the event row keeps only what the model is shown of it,
opened by a marker that names the stored text.

What the model sees is the agent's choice (``Limits.large_result_view``):

- ``whole``: the stored text, put back in place of the marker when a model request is made
  (the log stays small; the request does not);
- ``head``: the first ``Limits.large_result_head`` characters and a note naming the handle;
- ``handle``: only the note: the model passes the handle to a tool that reads the text
  (``Runtime.stored_result``).

The marker is the first line of the recorded content, ``[stead result sha256:<hex> <n>
chars]``: a digest any export, fork or pruning already finds wherever a log names one. A
small result that happens to start like a marker is recorded with a space in front, so only
a result stored here is ever read back as one. Pure: the store and the request are the
runtime's.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Literal, TypeAlias

LargeResultView: TypeAlias = Literal["whole", "head", "handle"]

VIEWS: Final = ("whole", "head", "handle")

MEDIA_TYPE: Final = "text/x-stead-result"
"""The media type a stored result's blob is recorded with."""

_PREFIX: Final = "[stead result sha256:"
_MARKER = re.compile(r"\[stead result (sha256:[0-9a-f]{64}) (\d+) chars\]\n")


def digest_of(text: str) -> tuple[str, bytes]:
    """The handle (``sha256:<hex>``) a result's text is stored under, and its bytes."""
    data = text.encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def shown(text: str, handle: str, view: LargeResultView, head: int) -> str:
    """What the log records of a stored result: its marker, then what the model reads."""
    marker = f"{_PREFIX}{handle.removeprefix('sha256:')} {len(text)} chars]\n"
    if view == "whole":
        return marker  # the whole text goes back in at each request
    note = (
        f"[stead: this result is {len(text):,} characters, stored as {handle}; pass that "
        "handle to a tool that reads stored results for the rest]"
    )
    if view == "head":
        return f"{marker}{text[:head]}\n\n{note}"
    return marker + note


def escaped(text: str) -> str:
    """A result that is not stored, made unable to pass for a marker."""
    return " " + text if text.startswith(_PREFIX) else text


def reference(content: str) -> tuple[str, int] | None:
    """The handle and length a recorded content's marker names, or None for a plain result."""
    if not content.startswith(_PREFIX):
        return None
    m = _MARKER.match(content)
    return None if m is None else (m.group(1), int(m.group(2)))


def expanded(content: str, texts: dict[str, str]) -> str:
    """A recorded content as a ``whole`` view shows it: the stored text in place of its
    marker (``texts`` by handle); the content itself for any other."""
    ref = reference(content)
    if ref is None or content != f"{_PREFIX}{ref[0].removeprefix('sha256:')} {ref[1]} chars]\n":
        return content
    text = texts.get(ref[0])
    return content if text is None else text
