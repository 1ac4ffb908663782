"""Methods callable on the class with an id, or on an instance for itself.

``AsyncSandbox.kill("abc")`` and ``await sandbox.kill()`` are the same operation; E2B's
SDK offers both spellings, so Bac's does too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

PC = ParamSpec("PC")
PI = ParamSpec("PI")
RC = TypeVar("RC")
RI = TypeVar("RI")


class dual_method(Generic[PC, RC, PI, RI]):
    """Dispatch to ``on_class(cls, ...)`` or ``on_instance(self, ...)``."""

    def __init__(
        self,
        on_class: Callable[Concatenate[type[Any], PC], RC],
        on_instance: Callable[Concatenate[Any, PI], RI],
    ) -> None:
        self._on_class = on_class
        self._on_instance = on_instance
        self.__doc__ = on_instance.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[PC, RC]: ...
    @overload
    def __get__(self, obj: object, owner: type[Any]) -> Callable[PI, RI]: ...
    def __get__(
        self, obj: object | None, owner: type[Any]
    ) -> Callable[PC, RC] | Callable[PI, RI]:
        if obj is None:
            return functools.partial(self._on_class, owner)
        return functools.partial(self._on_instance, obj)
