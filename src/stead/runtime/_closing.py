"""``async with`` for the objects that hold a store: leaving the block closes them."""

from __future__ import annotations

from typing import Self


class Closing:
    """``async with x:`` is ``x`` itself, and ``x.close()`` when the block ends (however)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError
