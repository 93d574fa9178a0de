"""The public API is deliberate: pin it, and keep the layers pointing down."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stead
import stead.errors
import stead.testing


def test_all_is_one_sorted_literal_list_and_the_docstring_names_each_by_topic() -> None:
    """``stead.__all__`` is written once, sorted (httpx's ``__init__.py``); the module's
    docstring lists the same names by topic, so a name added to one and not the other fails."""
    source = Path(stead.__file__).read_text()
    assert stead.__all__ == sorted(stead.__all__)
    assert source.count("__all__ = [") == 1 and "__all__ +=" not in source
    assert len(set(stead.__all__)) == len(stead.__all__)
    assert set(stead.errors.__all__) <= set(stead.__all__)
    topics = (stead.__doc__ or "").split("by topic:", 1)[1]
    assert set(re.findall(r"``(\w+)``", topics)) - {"__all__"} == set(stead.__all__)


def test_public_api_is_pinned() -> None:
    assert set(stead.__all__) == {
        "AbortSignal",
        "Aborted",
        "AmbiguousId",
        "ExecutorError",
        "SchemaTooNew",
        "Agent",
        "AssistantMessage",
        "Attachment",
        "ConversationBusy",
        "Document",
        "Image",
        "ImportFileError",
        "ToolResultMessage",
        "TurnCost",
        "UnknownConversation",
        "UserMessage",
        "WaitTimeout",
        "ChildRunFailed",
        "ApprovalError",
        "Budget",
        "Conflict",
        "CorruptEvent",
        "DispatchRejected",
        "Done",
        "Fenced",
        "IllegalTransition",
        "InvalidEvent",
        "InvalidInput",
        "LeaseHeld",
        "Limits",
        "ModelSettings",
        "NotDone",
        "PendingApproval",
        "ProviderError",
        "ProviderHTTPError",
        "RecoveryPolicy",
        "ReplayDiverged",
        "Retention",
        "RunLogFilter",
        "RunNotFound",
        "RunStatus",
        "RunView",
        "Runtime",
        "SteadError",
        "StoreError",
        "Tool",
        "ToolContext",
        "Unknown",
        "UnknownAgent",
        "Usage",
        "UserError",
        "__version__",
        "agent_tool",
        "question_tool",
        "configure_logging",
        "redact",
        "tool",
    }
    for name in stead.__all__:
        assert hasattr(stead, name), name
    assert set(stead.testing.__all__) >= {"ScriptedModel", "Reply", "SideEffects", "arm_crash"}


def test_run_cancelled_is_a_deprecated_alias_of_aborted() -> None:
    """The exception was renamed (it shared its name with the event ``RunCancelled``); the
    old name still works, with a warning, and is out of ``__all__``."""
    for module in (stead, stead.errors):
        with pytest.warns(DeprecationWarning, match="Aborted"):
            assert module.RunCancelled is stead.Aborted
        assert "RunCancelled" not in module.__all__
    assert not hasattr(stead.errors, "LeaseLost")


def test_renamed_runtime_and_server_names_are_deprecated_aliases() -> None:
    """``RunSession`` (the owner's handle on a run, now ``OwnedRun``: "session" is a run's
    conversation) and the two ``serve`` functions were renamed; the old names still work,
    with a warning, and are out of ``__all__``."""
    import stead.runtime
    import stead.server

    old = {
        (stead.runtime, "RunSession"): stead.runtime.OwnedRun,
        (stead.runtime, "serve"): stead.runtime.serve_worker,
        (stead.server, "serve"): stead.server.serve_http,
    }
    for (module, name), new in old.items():
        with pytest.warns(DeprecationWarning, match=new.__name__):
            assert getattr(module, name) is new
        assert name not in module.__all__
    with pytest.raises(AttributeError):
        stead.runtime.NoSuchName  # noqa: B018


def test_layers_point_down() -> None:
    """core <- store/tools/providers <- runtime <- cli/demo (import-linter contract)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is a dev dependency; make test installs it"
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([exe], cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_effect_ledger_is_a_deprecated_alias_of_side_effects() -> None:
    """The record of side effects was renamed ("ledger" names the execution ledger alone);
    the old name still imports, with a warning, and is out of ``__all__``."""
    with pytest.warns(DeprecationWarning, match="SideEffects"):
        from stead.testing import EffectLedger
    assert EffectLedger is stead.testing.SideEffects
    assert "EffectLedger" not in stead.testing.__all__
