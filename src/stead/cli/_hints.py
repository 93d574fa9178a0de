"""The next-step commands the CLI prints, written so each works as printed.

A hint is a whole command: the run's short id, the call's id, the token a decision quotes,
and the ``--store``, ``--agents`` and ``--deps`` the command that prints it was given (a
store named by ``$STEAD_STORE`` or the default is left out: the same shell finds it again).
A command given no ``--agents`` (``runs show``, ``runs watch``, ``cancel``) takes the ones
the run's agent was loaded with, as the run records them (``Agent.loaded_from``). Where a
hint needs ``--agents`` and neither has one (an agent built in code), it says so in words
instead of printing a command that cannot work.
"""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import dataclass, replace
from typing import Any

from stead.cli._ids import short_id

DEFAULT_STORE = "sqlite:///stead.db"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hints:
    """What a printed command repeats of the command that prints it."""

    store: str | None = None
    """``--store`` to repeat; None when the environment names it already."""
    agents: str | None = None
    deps: str | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> Hints:
        store = getattr(args, "store", None)
        implied = os.environ.get("STEAD_STORE", DEFAULT_STORE)
        return cls(
            store=store if store and store != implied else None,
            agents=getattr(args, "agents", None) or None,
            deps=getattr(args, "deps", None) or None,
        )

    def for_run(self, config: dict[str, Any]) -> Hints:
        """These hints, with the ``--agents`` and ``--deps`` the run's agent was loaded with
        when this command was given none (``stead runs show`` is given none: it reads)."""
        from stead.runtime.agent import loaded_from

        found = loaded_from(config)
        if self.agents is not None or found is None:
            return self
        return replace(self, agents=found[0], deps=found[1])

    def command(self, *words: str, agents: bool = False) -> str:
        """``stead WORDS`` with ``--store``, and with ``agents`` the ``--agents`` and
        ``--deps`` this command had (the caller checks ``self.agents`` first)."""
        parts = ["stead", *words]
        if self.store is not None:
            parts += ["--store", self.store]
        if agents and self.agents is not None:
            parts += ["--agents", self.agents]
            if self.deps is not None:
                parts += ["--deps", self.deps]
        return " ".join(shlex.quote(p) for p in parts)

    def resume(self, run_id: str) -> str | None:
        """The command that continues the run here; None without ``--agents``."""
        if self.agents is None:
            return None
        return self.command("resume", short_id(run_id), agents=True)

    def answer(self, run_id: str, call_id: str, schema: Any) -> str | None:
        """``stead answer`` with an answer of the question's type filled in (the first
        choice, or a placeholder text), to edit; None without ``--agents``."""
        if self.agents is None:
            return None
        return self.command("answer", short_id(run_id), call_id, _example(schema), agents=True)

    def approve(self, run_id: str, call_id: str, token: str) -> str:
        return self.command("approve", short_id(run_id), call_id, _token(token), agents=True)

    def deny(self, run_id: str, call_id: str, token: str) -> str:
        words = ("deny", short_id(run_id), call_id, _token(token), "--reason", "not now")
        return self.command(*words, agents=True)

    def decide(self, run_id: str, call_id: str, token: str) -> str:
        words = ("decide", short_id(run_id), call_id, "not_happened", _token(token))
        return self.command(*words, agents=True)

    def watch(self, run_id: str) -> str:
        return self.command("runs", "watch", short_id(run_id))


def _token(token: str) -> str:
    """``--token=TOKEN`` as one word: a token may start with ``-`` (it is URL-safe base64),
    which argparse would read as an option after a separate ``--token``."""
    return f"--token={token}"


def _example(schema: Any) -> str:
    """An answer that fits ``schema``, as the command line takes it (JSON, or plain text)."""
    import json

    if isinstance(schema, dict):
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            first = schema["enum"][0]
            return first if isinstance(first, str) else json.dumps(first)
        kind = schema.get("type")
        if kind == "boolean":
            return "true"
        if kind in ("integer", "number"):
            return "1"
    return "your answer"
