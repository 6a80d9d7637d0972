"""Find the App of a user's program from 'module:attr' or 'path/file.py[:attr]'."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from oncefire.app import App
from oncefire.errors import ConfigError

TARGET_HINT = "give APP as module:app or path/file.py"


def _failed(what: str, exc: BaseException) -> ConfigError:
    """A one-line error for a program that raised, or exited, while it was imported."""
    if isinstance(exc, SystemExit):
        status = "" if exc.code is None else f" with status {exc.code!r}"
        return ConfigError(
            f"Cannot load {what}: it exited{status} while being imported (sys.exit at import "
            "time); oncefire imports the app's module, so keep sys.exit under "
            '`if __name__ == "__main__":`.'
        )
    if isinstance(exc, SyntaxError):
        where = f" ({Path(exc.filename or what).name}, line {exc.lineno})"
        return ConfigError(f"Cannot load {what}: SyntaxError: {exc.msg}{where}.")
    message = str(exc).splitlines()[0] if str(exc) else ""
    return ConfigError(
        f"Cannot load {what}: {type(exc).__name__}: {message} (fix it, then run the command again)."
    )


def load_module(path: Path) -> ModuleType:
    """Import a .py file as a module (once per process: a second load returns the first)."""
    if not path.is_file():
        raise ConfigError(f"No such file {str(path)!r}: {TARGET_HINT}.")
    name = f"oncefire_user_{path.stem}"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path.resolve()):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path.resolve())
    if spec is None or spec.loader is None:
        raise ConfigError(f"Cannot import {str(path)!r} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise _failed(str(path), exc) from exc
    return module


def _import(module_part: str) -> ModuleType:
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        return importlib.import_module(module_part)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_part.startswith(exc.name):
            raise ConfigError(f"Cannot import {module_part!r} ({exc}): {TARGET_HINT}.") from exc
        raise _failed(module_part, exc) from exc
    except (Exception, SystemExit) as exc:
        raise _failed(module_part, exc) from exc


def load_app(target: str, *, store: str | None = None) -> App:
    """Import the program and return its App (the attribute named, or the only App in it).

    store, if given (the --store flag), becomes the default store of the program's Apps; an
    App whose code names another store is an error rather than a silent choice.
    """
    module_part, _, attr = target.strip().partition(":")
    if not module_part:
        raise ConfigError(f"APP is empty: {TARGET_HINT}.")
    if store:
        os.environ["ONCEFIRE_STORE"] = store
    if module_part.endswith(".py") or "/" in module_part:
        module = load_module(Path(module_part))
    else:
        module = _import(module_part)
    if attr:
        found = getattr(module, attr, None)
        if not isinstance(found, App):
            raise ConfigError(f"{target!r}: {attr!r} is not an oncefire App.")
        app = found
    else:
        apps = list({id(v): v for v in vars(module).values() if isinstance(v, App)}.values())
        default = _firebase_default_app() if not apps else None
        if default is not None:  # a Firebase-style main.py: its functions are on the default App
            apps = [default]
        if len(apps) != 1:
            raise ConfigError(
                f"{target!r} holds {len(apps)} oncefire Apps: name one as {module_part}:NAME."
            )
        app = apps[0]
    if store and app.settings.store != store:
        raise ConfigError(
            f"--store {store} conflicts with the store {target} names in its code "
            f"({app.settings.store}): drop --store, or make the app use App() (then "
            "--store and $ONCEFIRE_STORE choose)."
        )
    return app


def _firebase_default_app() -> App | None:
    """The implicit App of oncefire.firebase, if the program imported it and made it."""
    apps = sys.modules.get("oncefire.firebase.registration.apps")
    return None if apps is None else apps.created_app()
