"""Firebase's params: values a module declares, read from the environment and `.env` files.

`StringParam("GREETING", default="hi").value`. Values come from the environment, else from
`.env`, `.env.<project>` and `.env.local` beside the declaring module (later files win, as the
Firebase CLI reads them; the environment wins over every file). A param with no value and no
default is refused when it is declared, so a module missing one fails at load with one line.
Built-ins: `PROJECT_ID` ($GCLOUD_PROJECT, else the setting `project_id`), `STORAGE_BUCKET`
and `DATABASE_URL` (their variables, else derived from the project id).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from oncefire.errors import ConfigError

T = TypeVar("T")
_NAME = re.compile(r"^[A-Z0-9_]+$")
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_lock = threading.Lock()
_loaded: set[Path] = set()  # folders whose .env files are in os.environ
_params: dict[str, Param[Any] | SecretParam] = {}
_app_project: str | None = None  # the default App's setting project_id, once it is made


class Expression(Generic[T]):
    """A value known when the functions run: a param, a comparison or a choice."""

    @property
    def value(self) -> T:
        """The value now."""
        raise NotImplementedError

    def compare(self, comparator: str, right: Any) -> CompareExpression:
        """A boolean expression comparing this value with right (==, >, >=, <, <=)."""
        return CompareExpression(comparator, self, right)

    def equals(self, right: Any) -> CompareExpression:
        """A boolean expression: this value == right."""
        return self.compare("==", right)


@dataclass(frozen=True)
class CompareExpression(Expression[bool]):
    """`left <comparator> right`, as Firebase's."""

    comparator: str
    left: Expression[Any]
    right: Any

    @property
    def value(self) -> bool:
        """The comparison's result now."""
        left, right = self.left.value, self.right
        checks = {
            "==": lambda: left == right,
            ">": lambda: left > right,
            ">=": lambda: left >= right,
            "<": lambda: left < right,
            "<=": lambda: left <= right,
        }
        if self.comparator not in checks:
            raise ConfigError(f"Unknown comparator {self.comparator!r}: use ==, >, >=, < or <=.")
        return bool(checks[self.comparator]())

    def then(self, if_true: Any, if_false: Any) -> TernaryExpression[Any]:
        """if_true when the comparison holds, else if_false."""
        return TernaryExpression(self, if_true, if_false)


@dataclass(frozen=True)
class TernaryExpression(Expression[T]):
    """`test ? if_true : if_false`, as Firebase's."""

    test: Expression[bool]
    if_true: T
    if_false: T

    @property
    def value(self) -> T:
        """if_true or if_false, by the test's value now."""
        return self.if_true if self.test.value else self.if_false


def resolve(value: Any) -> Any:
    """value itself, or an expression's value."""
    return value.value if isinstance(value, Expression) else value


@dataclass(frozen=True)
class Param(Expression[T]):
    """A declared dependency on an outside value, named as its environment variable."""

    name: str
    default: T | Expression[T] | None = None
    label: str | None = None
    description: str | None = None
    immutable: bool | None = None
    input: Any = None  # Firebase's TextInput/SelectInput/...: a deploy-time prompt, unused here

    def __post_init__(self) -> None:
        _declare(self, has_default=self.default is not None)

    def _raw(self) -> str | None:
        return os.environ.get(self.name)

    def _default(self, empty: T) -> T:
        return empty if self.default is None else resolve(self.default)


@dataclass(frozen=True)
class StringParam(Param[str]):
    """A string param."""

    @property
    def value(self) -> str:
        """The environment's value, else the default, else ""."""
        raw = self._raw()
        return raw if raw is not None else self._default("")


@dataclass(frozen=True)
class IntParam(Param[int]):
    """An integer param."""

    @property
    def value(self) -> int:
        """The environment's value as an int, else the default, else 0."""
        raw = self._raw()
        return _convert(self.name, raw, int) if raw is not None else self._default(0)


@dataclass(frozen=True)
class FloatParam(Param[float]):
    """A float param (Firebase's `_FloatParam`)."""

    @property
    def value(self) -> float:
        """The environment's value as a float, else the default, else 0.0."""
        raw = self._raw()
        return _convert(self.name, raw, float) if raw is not None else self._default(0.0)


_FloatParam = FloatParam


@dataclass(frozen=True)
class BoolParam(Param[bool]):
    """A boolean param: "true" (any case) is True."""

    @property
    def value(self) -> bool:
        """The environment's value, else the default, else False."""
        raw = self._raw()
        return raw.lower() == "true" if raw is not None else self._default(False)


@dataclass(frozen=True)
class ListParam(Param[list[str]]):
    """A list of strings: a JSON array, or comma-separated as in a `.env` file."""

    @property
    def value(self) -> list[str]:
        """The environment's list, else the default, else []."""
        raw = self._raw()
        if raw is None:
            return self._default([])
        if raw.startswith("[") and raw.endswith("]"):
            try:
                return [str(item) for item in json.loads(raw)]
            except ValueError:
                return []
        return [part for part in raw.split(",") if part]


@dataclass(frozen=True)
class SecretParam(Expression[str]):
    """A secret, read from the environment (or a `.env` file) like any param."""

    name: str
    label: str | None = None
    description: str | None = None
    immutable: bool | None = None

    def __post_init__(self) -> None:
        _declare(self, has_default=False)

    @property
    def value(self) -> str:
        """The secret's value."""
        return os.environ.get(self.name, "")


@dataclass(frozen=True)
class _BuiltIn(StringParam):
    """A param every module has; derived when its variable is not set."""

    def __post_init__(self) -> None:
        pass  # not declared by the user, never missing

    @property
    def value(self) -> str:
        """The variable's value, else the one derived from the project id."""
        raw = self._raw()
        if raw is not None:
            return raw
        project = project_id()
        if not project:
            return ""
        return {
            "GCLOUD_PROJECT": project,
            "STORAGE_BUCKET": f"{project}.appspot.com",
            "DATABASE_URL": f"https://{project}-default-rtdb.firebaseio.com",
        }.get(self.name, "")


PROJECT_ID = _BuiltIn("GCLOUD_PROJECT", description="The project id")
STORAGE_BUCKET = _BuiltIn("STORAGE_BUCKET", description="The default storage bucket")
DATABASE_URL = _BuiltIn("DATABASE_URL", description="The Realtime Database URL")


def define_string(name: str, **options: Any) -> StringParam:
    """A StringParam (the JavaScript SDK's defineString)."""
    return StringParam(name, **options)


def define_int(name: str, **options: Any) -> IntParam:
    """An IntParam (defineInt)."""
    return IntParam(name, **options)


def define_float(name: str, **options: Any) -> FloatParam:
    """A FloatParam (defineFloat)."""
    return FloatParam(name, **options)


def define_bool(name: str, **options: Any) -> BoolParam:
    """A BoolParam (defineBoolean)."""
    return BoolParam(name, **options)


def define_list(name: str, **options: Any) -> ListParam:
    """A ListParam (defineList)."""
    return ListParam(name, **options)


def define_secret(name: str, **options: Any) -> SecretParam:
    """A SecretParam (defineSecret)."""
    return SecretParam(name, **options)


def project_id() -> str:
    """$GCLOUD_PROJECT, else the default App's setting `project_id` ($ONCEFIRE_PROJECT_ID
    before the App is made); "" when unset."""
    from oncefire.settings import Settings

    if os.environ.get("GCLOUD_PROJECT"):
        return os.environ["GCLOUD_PROJECT"]
    return _app_project if _app_project is not None else Settings.from_env().project_id


def use_project(project: str | None) -> None:
    """The default App's project id (None: not made yet); its module calls this."""
    global _app_project
    _app_project = project


def load_dotenv(folder: Path) -> None:
    """Put the `.env`, `.env.<project>` and `.env.local` files of folder in os.environ (once
    per folder); a variable the environment already has keeps its value."""
    folder = folder.resolve()
    with _lock:
        if folder in _loaded:
            return
        project = project_id()
        names = [".env", *([f".env.{project}"] if project else []), ".env.local"]
        values: dict[str, str] = {}
        for name in names:
            values.update(read_dotenv(folder / name))
        for key, text in values.items():
            os.environ.setdefault(key, text)
        _loaded.add(folder)


def read_dotenv(path: Path) -> dict[str, str]:
    """The KEY=VALUE lines of a .env file ({} when there is none); ConfigError names a bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    values: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ConfigError(f"{path}, line {number}: expected KEY=VALUE, got {line.strip()!r}.")
        key, text = match.groups()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
            quote, text = text[0], text[1:-1]
            if quote == '"':
                text = text.replace("\\n", "\n").replace('\\"', '"')
        else:
            text = text.split(" #", 1)[0].rstrip()
        values[key] = text
    return values


def forget_dotenv() -> None:
    """Read the .env files again on the next declaration (for tests)."""
    with _lock:
        _loaded.clear()


def caller_folder() -> Path:
    """The folder of the module that called into oncefire.firebase (else the working one)."""
    frame = sys._getframe(1)
    here = Path(__file__).resolve().parent
    while frame is not None:
        filename = frame.f_code.co_filename
        is_outside = not filename.startswith("<") and "dataclasses" not in filename
        if is_outside and Path(filename).resolve().parent != here:
            return Path(filename).resolve().parent
        frame = frame.f_back  # type: ignore[assignment]
    return Path.cwd()


def _declare(param: Param[Any] | SecretParam, *, has_default: bool) -> None:
    if not _NAME.match(param.name):
        raise ConfigError(
            f"Param name {param.name!r} must use only upper-case letters, digits and _, "
            "as UPPER_SNAKE_CASE."
        )
    folder = caller_folder()
    load_dotenv(folder)
    if os.environ.get(param.name) is None and not has_default:
        raise ConfigError(
            f"Param {param.name} has no value: set {param.name} in the environment or in .env "
            f"beside the module ({folder}), or give it a default."
        )
    if isinstance(param, Param):
        param.value  # noqa: B018 - a value of the wrong type fails here, at load
    _params[param.name] = param  # a module loaded again declares its params again


def _convert(name: str, raw: str, kind: type[Any]) -> Any:
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"Param {name}={raw!r} is not a valid {kind.__name__}.") from None
