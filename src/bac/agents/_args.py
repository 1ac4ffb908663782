"""A tool call's arguments, read by name and type, each mistake one clear sentence.

Models get arguments wrong (a number as a string, a missing field, a made-up one): each
accessor checks one argument against what its tool's schema says and raises
:class:`ArgumentError` naming it, the value and what was expected, so the model can
correct the call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class ArgumentError(ValueError):
    """An argument is missing, unknown or of the wrong type."""


class Arguments:
    """The arguments of one call of tool ``tool``; ``allowed`` are its schema's names."""

    def __init__(self, tool: str, raw: Mapping[str, Any] | None,
                 allowed: Collection[str]) -> None:
        if raw is not None and not isinstance(raw, Mapping):
            raise ArgumentError(f"{tool}: the arguments must be a JSON object, got {raw!r:.100}")
        self._tool = tool
        self._raw: Mapping[str, Any] = raw or {}
        unknown = sorted(set(self._raw) - set(allowed))
        if unknown:
            raise ArgumentError(
                f"{tool}: unknown argument(s) {', '.join(unknown)}; it takes "
                f"{', '.join(sorted(allowed)) or 'none'}")

    def _wrong(self, name: str, expected: str) -> ArgumentError:
        return ArgumentError(
            f"{self._tool}: {name} must be {expected}, got {self._raw[name]!r:.100}")

    def _get(self, name: str, kind: type[T] | tuple[type, ...], expected: str,
             default: T | None) -> T | None:
        if self._raw.get(name) is None:
            return default
        value = self._raw[name]
        # bool is an int in Python, never in JSON Schema.
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self._wrong(name, expected)
        return value  # type: ignore[return-value]

    def string(self, name: str) -> str:
        value = self.optional_string(name)
        if not value:
            raise ArgumentError(f"{self._tool}: {name} is required (a non-empty string)")
        return value

    def optional_string(self, name: str, default: str | None = None) -> str | None:
        return self._get(name, str, "a string", default)

    def text(self, name: str) -> str:
        """A required string that may be empty (a file's contents)."""
        value = self._get(name, str, "a string", None)
        if value is None:
            raise ArgumentError(f"{self._tool}: {name} is required (a string)")
        return value

    def choice(self, name: str, choices: Collection[str], default: str) -> str:
        value = self.optional_string(name, default) or default
        if value not in choices:
            raise self._wrong(name, "one of " + ", ".join(repr(c) for c in choices))
        return value

    def integer(self, name: str, default: int, *, minimum: int = 0,
                maximum: int | None = None) -> int:
        value = self._get(name, (int, float), "a whole number", None)
        if value is None:
            return default
        if value != int(value) or value < minimum or (maximum is not None and value > maximum):
            bound = f" between {minimum} and {maximum}" if maximum is not None else \
                f" of at least {minimum}"
            raise self._wrong(name, "a whole number" + bound)
        return int(value)

    def number(self, name: str, default: float, *, minimum: float = 0) -> float:
        value = self._get(name, (int, float), "a number", None)
        if value is None:
            return default
        if value < minimum:
            raise self._wrong(name, f"a number of at least {minimum}")
        return float(value)

    def boolean(self, name: str, default: bool) -> bool:
        value = self._get(name, bool, "true or false", default)
        return default if value is None else value

    def strings(self, name: str) -> dict[str, str]:
        """An object of string values (metadata, env vars); empty when absent."""
        value = self._get(name, dict, "an object of strings", None)
        if value is None:
            return {}
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self._wrong(name, "an object whose values are strings")
        return dict(value)
