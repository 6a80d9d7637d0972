"""Find the App of a user's program from 'module:attr' or 'path/file.py[:attr]'."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from oncefire.app import App
from oncefire.errors import ConfigError


def load_module(path: Path) -> ModuleType:
    """Import a .py file as a module."""
    if not path.is_file():
        raise ConfigError(f"No such file {str(path)!r}: give module:app or a path to a .py file.")
    name = f"oncefire_user_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"Cannot import {str(path)!r} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent.resolve()))
    spec.loader.exec_module(module)
    return module


def load_app(target: str) -> App:
    """Import the program and return its App (the attribute named, or the only App in it)."""
    module_part, _, attr = target.partition(":")
    if module_part.endswith(".py") or "/" in module_part:
        module = load_module(Path(module_part))
    else:
        if "" not in sys.path and "." not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"Cannot import {module_part!r} ({exc}): give module:app or path/file.py."
            ) from exc
    if attr:
        found = getattr(module, attr, None)
        if not isinstance(found, App):
            raise ConfigError(f"{target!r}: {attr!r} is not an oncefire App.")
        return found
    apps = [v for v in vars(module).values() if isinstance(v, App)]
    if len(apps) != 1:
        raise ConfigError(
            f"{target!r} holds {len(apps)} oncefire Apps: name one as {module_part}:NAME."
        )
    return apps[0]
