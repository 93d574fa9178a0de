"""Agent versions across deploys (pure): an agent's fingerprint, and what a drive does when
the run was recorded under another one (docs/lifecycle.md).

A fingerprint is a digest of what decides how a run goes on: the agent's name, its tools'
names, schemas and effect classes, its instructions, its model, its output type and the
``version=`` label its author gave it. The run records it (``agent_recorded``) when it is
first driven, and again (``agent_changed``) whenever a different one drives it. What happens
then is the agent's policy:

* ``continue`` (the default): record the change and go on;
* ``pin``: only a worker whose fingerprint matches drives the run; others leave it alone
  (a claim skips it, so they never even bump its epoch);
* ``fail``: the run fails with code ``agent_changed``, naming both versions.

In every policy, a call recorded in the log and not yet answered that names a tool the agent
no longer has, or whose arguments its schema no longer accepts, fails the run with code
``tool_changed`` rather than feeding a tool arguments it was not written for (the runtime
finds those calls; the verdict is ``broken_calls``'s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from stead.core.canonical import JSON, canonical_json, sha256_hex

VersionPolicy = Literal["continue", "pin", "fail"]
POLICIES: Final = ("continue", "pin", "fail")
"""Every policy, the default first."""

Verdict = Literal["record", "same", "changed", "leave", "fail"]
"""What a drive does about versions: record the first fingerprint; nothing (same); record a
change and go on; leave the run to a worker of its version (``pin``); fail it."""

CHANGED: Final = "agent_changed"
"""The failure code of a run whose agent changed under the ``fail`` policy."""
TOOL_CHANGED: Final = "tool_changed"
"""The failure code of a run with a recorded call its agent can no longer take."""


def fingerprint(description: JSON) -> str:
    """``fp_`` and 16 hex digits of the sha256 of the description's canonical JSON: the same
    description gives the same fingerprint in every process, on every machine."""
    return "fp_" + sha256_hex(canonical_json(description))[:16]


def verdict(recorded: str, mine: str, policy: VersionPolicy) -> Verdict:
    """What a drive by fingerprint ``mine`` does with a run that recorded ``recorded``
    (empty: none yet)."""
    if not recorded:
        return "record"
    if recorded == mine:
        return "same"
    if policy == "pin":
        return "leave"
    if policy == "fail":
        return "fail"
    return "changed"


def changed_message(agent: str, recorded: str, mine: str, labels: tuple[str, str]) -> str:
    """The message of an ``agent_changed`` failure: both versions, and what to do."""
    was = f"{recorded} ({labels[0]})" if labels[0] else recorded
    now = f"{mine} ({labels[1]})" if labels[1] else mine
    return (
        f"agent {agent!r} changed since this run was recorded: it ran as {was}, this worker "
        f"has {now}; its policy is 'fail'. Resume it with a worker of the old version, or "
        "change the policy to 'continue' to let the new version go on"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenCall:
    """A call the log records without a result."""

    tool_call_id: str
    name: str
    arguments: str


def broken_calls(
    calls: Iterable[OpenCall], accepts: Mapping[str, Callable[[str], str | None]]
) -> list[str]:
    """Why each open call cannot be fed to the agent's tools now: its tool is gone, or the
    tool's check of the recorded arguments (``accepts[name](arguments)``: None, or what is
    wrong) refuses them."""
    out = []
    for c in calls:
        check = accepts.get(c.name)
        if check is None:
            out.append(
                f"call {c.tool_call_id} names tool {c.name!r}, which the agent no longer has"
            )
            continue
        wrong = check(c.arguments)
        if wrong is not None:
            out.append(
                f"call {c.tool_call_id} of tool {c.name!r}: its recorded arguments no longer "
                f"fit the tool's schema ({wrong})"
            )
    return out
