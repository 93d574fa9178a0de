"""Tools: ``@tool``, argument schemas from type hints, ``ToolContext``, the registry.

    @tool(effect="idempotent_write")
    async def charge(order_id: str, cents: int, ctx: ToolContext) -> dict[str, str]:
        \"\"\"Charge an order.\"\"\"
        return await payments.charge(order_id, cents, key=ctx.idempotency_key)

This package knows how to describe, validate and call a tool; *when* a call runs, and what
happens to one that was in flight at a crash, is decided in ``stead.core`` and done by
``stead.runtime``.
"""

from stead.tools._answer import AnswerSpec
from stead.tools._context import ToolContext
from stead.tools._registry import ToolRegistry
from stead.tools._results import Done, NotDone, ReconcileAnswer, Unknown, serialize_result
from stead.tools._schema import SchemaTool
from stead.tools._tool import ApprovalPolicy, Reconciler, Tool, question_tool, tool

__all__ = [
    "AnswerSpec",
    "ApprovalPolicy",
    "Done",
    "NotDone",
    "ReconcileAnswer",
    "Reconciler",
    "SchemaTool",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "Unknown",
    "question_tool",
    "serialize_result",
    "tool",
]

# For the other packages of stead, not part of the public API (hence not in __all__): the
# queue-name check an agent applies, the run loop's side of ``ToolContext.run_child``, and
# what an MCP tool shares with a decorated one.
from stead.tools._queue import check_queue as check_queue
from stead.tools._run_child import CHILD_PORT as CHILD_PORT
from stead.tools._run_child import ChildPending as ChildPending
from stead.tools._run_child import ChildPort as ChildPort
from stead.tools._signature import HandlerShape as HandlerShape
from stead.tools._signature import Param as Param
from stead.tools._signature import describe_reconcile as describe_reconcile
from stead.tools._tool import TOOL_NAME as TOOL_NAME
from stead.tools._tool import check_options as check_options
