"""A public attribute fixed at construction, backed by a private one, declared in one line.

``Tool`` shows a dozen options it was built with and lets nobody change them (a tool's
definition is part of what a run recorded). Written as properties, each took five lines that
said the same thing; a ``Fixed`` is one. It is a ``property`` whose getter is
``operator.attrgetter`` (a read costs what the property's did, about 100 ns), setting it
raises ``AttributeError`` as a property without a setter does (and a type checker refuses
it), and documentation tools see a property with its docstring.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

T = TypeVar("T")


class Fixed(property, Generic[T]):
    """``name = Fixed[str]("_name", "What it is.")``: reads ``self._name``."""

    def __init__(self, private: str, doc: str) -> None:
        super().__init__(operator.attrgetter(private), None, None, doc)
        self.__doc__ = doc  # a subclass's own docstring would hide property's otherwise

    if TYPE_CHECKING:  # the runtime's __get__ is property's own (C): only its types here

        @overload
        def __get__(self, instance: None, owner: type | None = None, /) -> Fixed[T]: ...

        @overload
        def __get__(self, instance: object, owner: type | None = None, /) -> T: ...

        def __get__(self, instance: Any, owner: type | None = None, /) -> Any: ...

        def __set__(self, instance: Any, value: NoReturn, /) -> None:
            """Never: a type checker refuses an assignment, as to a property with no setter."""
