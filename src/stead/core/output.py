"""A structured output in the log: any JSON value, checked by the one codec's rules.

``RunCompleted.data`` (and ``RunState.data``) hold the validated value of an agent's
``output_type`` as plain JSON: an object for a model or a dataclass, a list for
``list[...]``, a string or a number for a scalar type. The type itself is not pure data (it is
validated with pydantic at the edge, ``stead.runtime.agent._output``); this is what the core keeps.
"""

from __future__ import annotations

from typing import Final

from stead.core.canonical import json_problem
from stead.core.codec import Node

JSON_VALUE: Final = Node(ok=lambda v: json_problem(v) is None, why=json_problem)
"""Any JSON value that reads back equal (no NaN, no tuple, integers in 64 bits)."""

OUTPUT_INVALID: Final = "output_invalid"
"""``RunFailed.code`` of a run whose model gave no valid structured output within
``Limits.output_retries`` retries (or before its last turn)."""

OUTPUT_TOOL: Final = "final_result"
"""The tool an agent with an ``output_type`` answers with."""
