"""Settings: argument > ONCEFIRE_* environment variable > default, validated."""

from __future__ import annotations

from typing import Any

import pytest

from oncefire import App, Settings
from oncefire.errors import ConfigError
from oncefire.settings import DEFAULT_STORE


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ("STORE", "LEASE", "CONCURRENCY", "SQLITE_SYNCHRONOUS", "MAX_PAYLOAD_BYTES")
    for name in (*names, "MAX_EVENT_DEPTH", "UNROUTED_RETENTION"):
        monkeypatch.delenv(f"ONCEFIRE_{name}", raising=False)


def test_defaults_are_the_documented_ones() -> None:
    settings = Settings.from_env()
    assert settings.store == DEFAULT_STORE == "sqlite:///oncefire.db"
    assert settings.lease == 30.0
    assert settings.renew_every == 10.0
    assert settings.sweep_every == 5.0
    assert settings.poll_interval <= 0.1
    assert settings.max_payload_bytes == 512 * 1024
    assert settings.sqlite_synchronous == "FULL"
    assert settings.max_event_depth == 16
    assert settings.store_retry_window == 10.0 and settings.read_store == ""
    assert settings.unrouted_retention == 7 * 86400.0  # an event no function takes: 7 days


def test_environment_overrides_defaults_and_arguments_override_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ONCEFIRE_LEASE", "45")
    monkeypatch.setenv("ONCEFIRE_CONCURRENCY", "3")
    monkeypatch.setenv("ONCEFIRE_STORE", "sqlite:///from-env.db")
    settings = Settings.from_env(concurrency=5)
    assert settings.lease == 45.0
    assert settings.concurrency == 5
    assert settings.store == "sqlite:///from-env.db"


def test_app_takes_its_store_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ONCEFIRE_STORE", "sqlite:///from-env.db")
    assert App().settings.store == "sqlite:///from-env.db"
    assert App("sqlite:///given.db").settings.store == "sqlite:///given.db"
    assert App(max_payload_bytes=10).settings.max_payload_bytes == 10


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONCEFIRE_LEASE", "soon")
    with pytest.raises(ConfigError, match="ONCEFIRE_LEASE"):
        Settings.from_env()


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="leese"):
        Settings.from_env(leese=3)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lease": 0},
        {"poll_interval": -1},
        {"renew_every": 30, "lease": 30},
        {"concurrency": 0},
        {"batch_size": 0},
        {"batch_size": 10_001},
        {"sqlite_synchronous": "OFF"},
    ],
)
def test_invalid_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Settings(**kwargs)  # type: ignore[arg-type]


def test_normal_synchronous_is_an_explicit_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env(sqlite_synchronous="NORMAL").sqlite_synchronous == "NORMAL"
    monkeypatch.setenv("ONCEFIRE_SQLITE_SYNCHRONOUS", "NORMAL")
    assert Settings.from_env().sqlite_synchronous == "NORMAL"


def test_an_unknown_store_url_is_a_config_error_when_the_app_is_made() -> None:
    with pytest.raises(ConfigError, match="Unknown store URL"):
        App("mysql://nope")


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"store": 123}, "store=123 must be a string"),
        ({"store": ""}, "Unknown store URL ''"),
        ({"store": "sqlite:///"}, "Bad SQLite store URL"),
        ({"store": "sqlite:///x.db?mode=ro"}, r"query parameters \('\?mode=ro'\)"),
        ({"lease": "30"}, "lease='30' must be a finite number"),
        ({"lease": float("nan")}, "lease=nan must be a finite number"),
        ({"concurrency": 1.5}, "concurrency=1.5 must be a whole number"),
        ({"concurrency": True}, "concurrency=True must be a whole number"),
        ({"sqlite_synchronous": 1}, "sqlite_synchronous=1 must be a string"),
        ({"max_payload_bytes": -1}, "max_payload_bytes=-1 must be a whole number of bytes"),
        ({"max_payload_bytes": 0}, "at least 1"),
        ({"max_payload_bytes": "1"}, "max_payload_bytes='1' must be a whole number"),
        ({"store_retry_window": 0}, "store_retry_window must be a positive number"),
        ({"read_store": "postgresql://standby/db"}, "SQLite stores have none"),
        (
            {"store": "postgresql://db1,db2/app", "read_store": "sqlite:///x.db"},
            "names a read replica of a PostgreSQL store",
        ),
    ],
)
def test_a_wrong_setting_is_refused_when_the_app_is_made(given: dict[str, Any], words: str) -> None:
    # Checked at construction, not on the store's first use (App(store=123) was accepted,
    # then failed with an AttributeError).
    with pytest.raises(ConfigError, match=words):
        App(**given)


def test_every_in_memory_url_still_makes_an_app() -> None:
    for url in ("sqlite://:memory:", "sqlite:///:memory:", "sqlite://"):
        app = App(url)
        app.db.document("a/b").set({"n": 1})
        assert app.db.document("a/b").get().to_dict() == {"n": 1}
        app.close()


@pytest.mark.slow
def test_max_event_depth_comes_from_the_environment_and_must_be_positive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ONCEFIRE_MAX_EVENT_DEPTH", "32")
    assert Settings.from_env().max_event_depth == 32
    assert Settings.from_env(max_event_depth=4).max_event_depth == 4
    monkeypatch.setenv("ONCEFIRE_MAX_EVENT_DEPTH", "0")
    with pytest.raises(ConfigError, match="max_event_depth must be at least 1"):
        Settings.from_env()
