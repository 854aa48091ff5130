"""Run a function once a module has been imported by someone else (a post-import hook).

The launcher uses it to add the Hugging Face ``Trainer`` callback only when the user's script
imports ``transformers.trainer``: a plain PyTorch job never imports transformers (or accelerate, and
whatever they probe at import time) through sagemaker-tc.

:func:`when_imported` puts a finder at the front of ``sys.meta_path``. When the module is imported,
the finder asks the other finders for its spec, wraps the spec's loader so that the function runs
right after the module's code, then takes itself out of ``sys.meta_path``; the module's loader is the
original again once the function has run.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the hook."""

    def __init__(self, loader: Any, hook: _PostImportFinder) -> None:
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._hook.fire(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, resource readers, ...
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback
        self.fired = False

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None):
        if fullname != self.name or self.fired:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None  # a namespace package or an old-style loader: left alone
            spec.loader = _Loader(spec.loader, self)
            return spec
        return None

    def fire(self, module: ModuleType) -> None:
        self.remove()
        if not self.fired:
            self.fired = True
            self.callback(module)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> Callable[[], None]:
    """Call ``callback(module)`` once module ``name`` is imported: now if it already is, else right
    after its code has run. An exception from ``callback`` propagates to the import that triggered it.

    Returns:
        A function that takes the hook out again (a no-op once it has fired).
    """
    finder = _PostImportFinder(name, callback)
    module = sys.modules.get(name)
    if module is not None:
        finder.fire(module)
    else:
        sys.meta_path.insert(0, finder)
    return finder.remove
