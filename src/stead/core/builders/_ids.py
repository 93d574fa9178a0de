"""Tool call ids unique in a run: what the log, the idempotency key and the next request use."""

from __future__ import annotations

import dataclasses

from stead.core.fold import RunState
from stead.core.messages import AssistantMessage


def unique_call_ids(
    state: RunState, turn_index: int, message: AssistantMessage
) -> AssistantMessage:
    """The reply with every tool call id unique in the run: the id the log, the idempotency
    key and the model's next request all use.

    Providers mostly give unique ids (``toolu_...``, ``call_...``), and those are kept as
    they are. Some servers do not: OpenAI-compatible ones that number calls per reply
    (``call_0`` in every turn), or a reply with two calls of one id, or none. Such an id
    (empty, repeated in the reply, or seen in an earlier turn of the run) becomes
    ``{id}_t{turn}_{position}`` (``call_t{turn}_{position}`` for an empty one), plus ``_{n}``
    should even that be taken: deterministic, so the same reply gets the same ids after a
    crash, and a suffix of letters, digits and ``_`` only, which both providers accept in
    ids. The recorded
    message carries the new ids, so its calls and their results always match in the
    history sent back. Returns ``message`` itself when nothing had to change.
    """
    taken = state.call_ids
    given = message.tool_calls
    if len(given) == 1:  # the common reply: one call, whose id needs one look
        if given[0].id and given[0].id not in taken:
            return message
    elif not given:
        return message
    else:
        ids = [c.id for c in given]
        if len(set(ids)) == len(ids) and all(ids) and taken.isdisjoint(ids):
            return message
    used: set[str] = set()
    calls = []
    for i, call in enumerate(message.tool_calls):
        cid = call.id
        if not cid or cid in used or cid in taken:
            base = f"{cid or 'call'}_t{turn_index}_{i}"
            cid, n = base, 1
            while cid in used or cid in taken:
                cid, n = f"{base}_{n}", n + 1
            call = dataclasses.replace(call, id=cid)
        used.add(cid)
        calls.append(call)
    return dataclasses.replace(message, tool_calls=tuple(calls))
