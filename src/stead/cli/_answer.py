"""``stead answer RUN CALL VALUE``: answer a question a run asked (a question tool)."""

from __future__ import annotations

import argparse
import os


def add_answer_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``answer`` command's arguments."""
    ans = sub.add_parser(
        "answer",
        help="answer a question a run asked",
        description="Answer a question tool's call: the answer is checked against the "
        "question's answer type (so --agents must name the run's agent), recorded, and is "
        "the call's result; the run then continues in this process. An answer that does not "
        "fit is refused and the run keeps waiting.",
    )
    ans.add_argument("run_id")
    ans.add_argument("call_id")
    ans.add_argument("value", help="the answer: JSON for a typed answer, else plain text")
    ans.add_argument("--token", default=None, help="the question's resume token")
    ans.add_argument("--by", default=os.environ.get("USER", "cli"))
    ans.add_argument("--agents", required=True, help="module:attr with the run's agent(s)")
