"""The implicit default App a Firebase-style module registers its functions on."""

from __future__ import annotations

import logging
import threading
from typing import Any

from oncefire.app import App
from oncefire.events import CURRENT_APP

log = logging.getLogger(__name__)
_lock = threading.Lock()
_app: App | None = None


def default_app() -> App:
    """The default App, made on first use (store from $ONCEFIRE_STORE, else ./oncefire.db)."""
    global _app
    with _lock:
        if _app is None:
            _app = App()
        return _app


def created_app() -> App | None:
    """The default App if a module has made it, else None (what the loader asks)."""
    return _app


def current_app() -> App:
    """The App running the current attempt, else the default App."""
    running = CURRENT_APP.get()
    return running if isinstance(running, App) else default_app()


def initialize_app(*args: Any, **kwargs: Any) -> App:
    """firebase_admin.initialize_app(): returns the default App; credentials and options
    name a Google project, which has no meaning here, so they are ignored."""
    if args or kwargs:
        log.info("initialize_app: credentials and options are ignored; the store is --store")
    return default_app()


def set_default_app(app: App | None) -> App | None:
    """Make app the default App (None forgets it, so the next use makes a new one); return
    the one it replaces. For tests, which give each module load its own store and clock."""
    global _app
    with _lock:
        previous, _app = _app, app
    return previous
