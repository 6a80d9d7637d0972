"""The implicit default App a Firebase-style module registers its functions on, and the
`firebase_admin` app `initialize_app()` returns over it."""

from __future__ import annotations

import logging
import threading
from typing import Any

from oncefire.app import App
from oncefire.errors import ConfigError
from oncefire.events import CURRENT_APP
from oncefire.firebase import options, params

log = logging.getLogger(__name__)
_lock = threading.Lock()
_app: App | None = None
DEFAULT_NAME = "[DEFAULT]"
_firebase_apps: dict[str, FirebaseApp] = {}


def default_app() -> App:
    """The default App, made on first use (store from $ONCEFIRE_STORE, else ./oncefire.db)."""
    global _app
    with _lock:
        if _app is None:
            _app = App()
            params.use_project(_app.settings.project_id)
        return _app


def created_app() -> App | None:
    """The default App if a module has made it, else None (what the loader asks)."""
    return _app


def current_app() -> App:
    """The App running the current attempt, else the default App."""
    running = CURRENT_APP.get()
    return running if isinstance(running, App) else default_app()


class AppOptions:
    """`firebase_admin.App.options`: `get(key, default=None)`."""

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = dict(options)

    def get(self, key: str, default: Any = None) -> Any:
        """The option named key (databaseURL, storageBucket, projectId, ...)."""
        return self._options.get(key, default)


class FirebaseApp:
    """What `firebase_admin.initialize_app()` returns: `name`, `options`, `project_id`,
    `credential`; every other attribute is the oncefire App's (`drain()`, `db`, ...)."""

    def __init__(self, name: str, credential: Any, options: dict[str, Any] | None) -> None:
        derived = {
            "projectId": params.PROJECT_ID.value or None,
            "storageBucket": params.STORAGE_BUCKET.value or None,
            "databaseURL": params.DATABASE_URL.value or None,
        }
        given = {k: v for k, v in derived.items() if v is not None}
        self.name = name
        self.credential = credential
        self.options = AppOptions({**given, **(options or {})})

    @property
    def project_id(self) -> str | None:
        """The project id: options' projectId, else params.PROJECT_ID; None when unset."""
        found = self.options.get("projectId")
        return str(found) if found else None

    def __getattr__(self, name: str) -> Any:
        return getattr(default_app(), name)

    def __repr__(self) -> str:
        return f"FirebaseApp({self.name!r}, project_id={self.project_id!r})"


def initialize_app(
    credential: Any = None, options: dict[str, Any] | None = None, name: str = DEFAULT_NAME
) -> FirebaseApp:
    """firebase_admin.initialize_app(): a Firebase app over the default App. Its options give
    the built-in params' values unless options names others; credentials name a Google
    account, which has no meaning here, so they are kept but unused. Calling it again with
    the same name returns a new app of that name (a module loaded again calls it again)."""
    params.load_dotenv(params.caller_folder())
    if credential is not None:
        log.info("initialize_app: credentials have no meaning in oncefire; ignored")
    if options is not None and not isinstance(options, dict):
        raise ConfigError(f"initialize_app options must be a dict; got {type(options).__name__}.")
    default_app()
    app = FirebaseApp(name, credential, options)
    with _lock:
        _firebase_apps[name] = app
    return app


def firebase_app(name: str = DEFAULT_NAME) -> FirebaseApp | None:
    """The Firebase app initialize_app made with that name, or None."""
    with _lock:
        return _firebase_apps.get(name)


def get_app(name: str = DEFAULT_NAME) -> FirebaseApp:
    """firebase_admin.get_app(): the app initialize_app made with that name."""
    with _lock:
        found = _firebase_apps.get(name)
    if found is None:
        raise ConfigError(f"No Firebase app named {name!r}: call initialize_app() first.")
    return found


def delete_app(app: FirebaseApp) -> None:
    """firebase_admin.delete_app(): forget the app of that name (the default App stays)."""
    with _lock:
        if _firebase_apps.get(app.name) is not app:
            raise ConfigError(f"The Firebase app {app.name!r} is not initialized.")
        del _firebase_apps[app.name]


def set_default_app(app: App | None) -> App | None:
    """Make app the default App (None forgets it, so the next use makes a new one); return
    the one it replaces. For tests, which give each module load its own store and clock."""
    global _app
    with _lock:
        previous, _app = _app, app
        _firebase_apps.clear()
    params.use_project(None if app is None else app.settings.project_id)
    options.forget_notes()
    params.forget_dotenv()
    return previous
