"""The Firebase-spelled apps of apps/firebase/, ported for a test: the import rewrite
`oncefire port` makes (firebase_functions and firebase_admin become oncefire.firebase).

A stand-in until `oncefire port` is on main: then the tests run the command instead.
"""

from __future__ import annotations

import re
from pathlib import Path

APPS = Path(__file__).parent / "apps" / "firebase"
_IMPORT = re.compile(r"^(\s*)(from|import) (firebase_functions|firebase_admin)\b", re.MULTILINE)


def ported(name: str, folder: Path) -> Path:
    """apps/firebase/<name> with its imports ported, written into folder."""
    text = (APPS / name).read_text()
    out = folder / name
    out.write_text(_IMPORT.sub(r"\1\2 oncefire.firebase", text))
    return out
