"""Package attributes loaded on first use (PEP 562), so importing a package costs nothing until a name is used."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_names(package: str, where: dict[str, str], namespace: dict[str, Any]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name in ``where`` (name -> module) is imported from its
    module when first asked for, then kept in ``namespace`` (the package's globals).

    >>> getattr_, dir_ = lazy_names("demo", {"sqrt": "math"}, {})
    >>> getattr_("sqrt")(9.0), "sqrt" in dir_()
    (3.0, True)
    """

    def __getattr__(name: str) -> Any:
        if name in where:
            value = namespace[name] = getattr(import_module(where[name]), name)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
