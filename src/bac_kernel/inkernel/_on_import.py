"""Run a callback on a module right after its first import, without importing it first.

The kernel's helpers patch libraries (matplotlib's box plots, PIL's image viewer) only
when user code imports them, so a kernel that never plots never pays for the library.
A meta-path finder wraps the loader of each watched module; a module already imported
gets its callback at once.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

Callback = Callable[[ModuleType], None]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, callback: Callback) -> None:
        self._inner = inner
        self._callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._callback(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.watched: dict[str, Callback] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        callback = self.watched.pop(fullname, None)
        if callback is None:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, callback)
                return spec
        return None


def when_imported(name: str, callback: Callback) -> None:
    """Call `callback(module)` once `name` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _Finder)), None)
    if finder is None:
        finder = _Finder()
        sys.meta_path.insert(0, finder)
    finder.watched[name] = callback
