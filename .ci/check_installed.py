"""Run with ``python -I .ci/check_installed.py`` (isolated: the source tree is not on the path): imports every
module of the installed packages, so a module missing from the installed package fails CI."""

import importlib
import pkgutil

import forensics
import parsers
import reports

modules = [m.name for p in (forensics, parsers, reports) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
for name in modules:
    importlib.import_module(name)
print(f"{len(modules)} installed modules import from {forensics.__file__.rsplit('/', 2)[0]}")
