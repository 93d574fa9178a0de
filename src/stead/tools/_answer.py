"""The answer a question tool waits for (``@tool(asks=...)``, ``question_tool``).

A question is a tool call that pauses the run in ``awaiting_approval`` until a person
answers (``Runtime.answer``); the validated answer is the call's result. The answer's type
is any type pydantic validates (``str``, a ``BaseModel``, a dataclass, a ``TypedDict``,
``Literal[...]``, ``list[...]``); its JSON schema is shown with the question.
"""

from __future__ import annotations

from typing import Any

import pydantic

from stead.errors import UserError
from stead.tools._results import serialize_result


class AnswerSpec:
    """What answer a question takes: validation, and the schema the person is shown."""

    __slots__ = ("_adapter", "schema", "type")

    def __init__(self, answer_type: Any, what: str) -> None:
        try:
            self._adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(answer_type)
            self.schema: dict[str, Any] = self._adapter.json_schema()
        except Exception as exc:
            raise UserError(
                f"{what}: asks takes the answer's type (str, a pydantic model, a dataclass, "
                f"a TypedDict, Literal[...], list[...]), and {answer_type!r} is not one "
                f"pydantic can validate: {exc}"
            ) from None
        self.type = answer_type

    def check(self, value: Any) -> tuple[str, None] | tuple[None, str]:
        """``(the result the model reads, None)`` for an answer that fits, else ``(None, why)``.

        A ``str`` that does not fit as it is is also tried as JSON, so a command line or a
        form can send ``{"speed": "express"}`` for a model-typed answer."""
        try:
            value = self._adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            if not isinstance(value, str):
                return None, _errors(exc)
            try:
                value = self._adapter.validate_json(value)
            except pydantic.ValidationError:
                return None, _errors(exc)
        return serialize_result(value), None


def _errors(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "the answer"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)
