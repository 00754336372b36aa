"""Import shim used only to run the reference (msprobe 26.2.0) without MindSpore installed.

msprobe imports MindSpore-only modules before its static-graph kernel compare; that compare itself
uses numpy and pandas only. With this folder on PYTHONPATH every ``mindspore`` name imports as an inert
class, so the reference's kernel compare runs. Nothing here computes anything.
"""

import importlib.abc
import importlib.machinery
import sys
import types


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert(name)


def _inert(name):
    return _Meta(
        name,
        (),
        {
            "__init__": lambda self, *a, **k: None,
            "__call__": lambda self, *a, **k: None,
            "__getattr__": lambda self, n: _inert(n),
        },
    )


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith("mindspore.") or fullname == "mindtorch":
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
__version__ = "2.6.0"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _inert(name)
