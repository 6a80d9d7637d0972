"""`firebase_admin.credentials`: accepted so `initialize_app(credentials.Certificate(...))`
ports unchanged; oncefire talks to no Google service, so nothing is read or checked."""

from __future__ import annotations

from typing import Any

__all__ = ["ApplicationDefault", "Base", "Certificate", "RefreshToken"]


class Base:
    """A credential: what it was made from, kept and unused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(unused)"


class Certificate(Base):
    """A service account key (a path or a dict); unused here."""


class ApplicationDefault(Base):
    """Google's application default credentials; unused here."""


class RefreshToken(Base):
    """A refresh token credential; unused here."""
