"""Large tool results, the acting side (``stead.core.large_results`` decides the shapes):
store a long result's text once by digest and record what the model is shown of it, and
put stored texts back into a model request where the agent shows results whole."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from stead.core.large_results import MEDIA_TYPE, digest_of, expanded, reference, shown
from stead.core.limits import Limits
from stead.core.messages import Message, ToolResultMessage
from stead.errors import StoreError
from stead.providers import ModelRequest
from stead.runtime.agent import chat_store
from stead.store import Store


class LargeResults:
    """One drive's stored results: what it stored or read, kept for its later requests."""

    __slots__ = ("clock", "limits", "store", "texts")

    def __init__(self, store: Store, limits: Limits, clock: Callable[[], float]) -> None:
        self.store, self.limits, self.clock = store, limits, clock
        self.texts: dict[str, str] = {}

    async def record(self, content: str) -> str:
        """What the log records of a successful result's text: stored by reference when it
        is longer than the limit, else the text (a look-alike marker defused)."""
        threshold = self.limits.result_by_reference
        if threshold is None or len(content) <= threshold:
            return " " + content if reference(content) is not None else content
        handle, data = digest_of(content)
        await chat_store(self.store).put_blob(handle, MEDIA_TYPE, data, now=self.clock())
        if self.limits.large_result_view == "whole":
            self.texts[handle] = content
        return shown(content, handle, self.limits.large_result_view, self.limits.large_result_head)

    async def request(self, request: ModelRequest) -> ModelRequest:
        """``request`` with every stored result shown whole put back in its place."""
        refs = [
            r
            for m in request.messages
            if isinstance(m, ToolResultMessage) and (r := reference(m.content)) is not None
        ]
        if not refs:
            return request
        wanted = {h for h, _ in refs} - set(self.texts)
        if wanted:
            found = await chat_store(self.store).get_blobs(wanted)
            missing = sorted(wanted - set(found))
            if missing:
                raise StoreError(f"the stored tool result {missing[0]} is not in the store")
            for h, data in found.items():
                self.texts[h] = data.decode("utf-8", "surrogatepass")
        messages: list[Message] = [
            dataclasses.replace(m, content=expanded(m.content, self.texts))
            if isinstance(m, ToolResultMessage) and m.content.startswith("[stead result ")
            else m
            for m in request.messages
        ]
        return dataclasses.replace(request, messages=tuple(messages))


async def stored_result(store: Store, handle: str) -> str:
    """The whole text of a result stored by reference, by its handle (``sha256:<hex>``)."""
    found = await chat_store(store).get_blobs([handle])
    if handle not in found:
        raise StoreError(f"no stored tool result {handle!r} in this store")
    return found[handle].decode("utf-8", "surrogatepass")
