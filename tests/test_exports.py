"""The public API is deliberate: pin it, and keep the layers pointing down."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import stead
import stead.testing


def test_public_api_is_pinned() -> None:
    assert stead.__all__ == sorted(stead.__all__)
    assert set(stead.__all__) == {
        "AbortSignal",
        "Agent",
        "ApprovalError",
        "Budget",
        "Conflict",
        "CorruptEvent",
        "Done",
        "Fenced",
        "IllegalTransition",
        "InvalidEvent",
        "InvalidInput",
        "LeaseHeld",
        "Limits",
        "NotDone",
        "PendingApproval",
        "ProviderError",
        "ProviderHTTPError",
        "RunCancelled",
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
        "tool",
    }
    for name in stead.__all__:
        assert hasattr(stead, name), name
    assert set(stead.testing.__all__) >= {"ScriptedModel", "Reply", "EffectLedger", "arm_crash"}


def test_layers_point_down() -> None:
    """core <- store/tools/providers <- runtime <- cli/demo (import-linter contract)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is a dev dependency; make test installs it"
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([exe], cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
