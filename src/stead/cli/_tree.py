"""A run's tree of child runs (``stead.agent_tool``), as ``stead runs show`` prints it: the
root, each child indented under the run that started it, their states and usage."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from stead.cli._render import STATUS_STYLE, plain
from stead.runtime import RunTree


def tree_table(tree: RunTree, current: str) -> Table:
    """The tree, the run being shown marked."""
    table = Table(show_edge=False, header_style="bold", title="run tree")
    for col in ("run", "agent", "status", "tokens (own)", "tokens (tree)"):
        table.add_column(col)
    for depth, node in tree.walk():
        mark = "▸ " if node.run_id == current else "  "
        table.add_row(
            Text(mark + "  " * depth + plain(node.run_id)),
            Text(plain(node.agent)),
            Text(node.status.value, style=STATUS_STYLE.get(node.status.value, "")),
            str(node.usage.total_tokens),
            str(node.tree_usage.total_tokens),
        )
    return table


def tree_json(tree: RunTree) -> dict[str, Any]:
    """The tree as ``runs show --json`` gives it."""
    return {
        "run_id": tree.run_id,
        "agent": tree.agent,
        "status": tree.status.value,
        "parent": tree.parent,
        "usage": tree.usage.to_json(),
        "tree_usage": tree.tree_usage.to_json(),
        "children": [tree_json(c) for c in tree.children],
    }
