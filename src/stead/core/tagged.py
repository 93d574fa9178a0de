"""Tagged records: the core's frozen, keyword-only, slotted dataclasses named by a ``kind``.

Events, the steps ``decide`` returns and the outcomes of effects are unions of small value
classes told apart by a tag. ``@tagged("run_started")`` declares one: the dataclass every
such record is (frozen, keyword-only, with slots) is written once here, and its tag is a
class attribute, not data: not a field, not a key of its row, and free to build and compare.
Classes that share fields (a turn's events, a call's) inherit them from a plain frozen base.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar, dataclass_transform

from stead.core.codegen import fast_init

T = TypeVar("T")


class TaggedRecord:
    """The base of a tagged record: its ``kind`` is set by ``tagged``, on the class."""

    __slots__ = ()
    kind: ClassVar[str]


@dataclass_transform(frozen_default=True, kw_only_default=True)
def tagged(kind: str) -> Callable[[type[T]], type[T]]:
    """Declare the class a frozen, keyword-only, slotted dataclass whose ``kind`` is ``kind``."""

    def declare(cls: type[T]) -> type[T]:
        if not issubclass(cls, TaggedRecord):  # else a type checker does not know its kind
            raise TypeError(f"a tagged record derives from TaggedRecord: {cls.__name__}")
        cls.kind = kind  # TaggedRecord declares it
        return fast_init(dataclass(frozen=True, slots=True, kw_only=True)(cls))

    return declare
