"""Renamed public names stay importable under their former name, with a warning."""

from __future__ import annotations

import pytest

import oncefire
import oncefire.errors
from oncefire import RecordHeldError


@pytest.mark.parametrize("module", [oncefire, oncefire.errors], ids=["oncefire", "errors"])
def test_claim_held_error_is_record_held_error_with_a_warning(module: object) -> None:
    with pytest.warns(DeprecationWarning, match="RecordHeldError"):
        former = module.ClaimHeldError  # type: ignore[attr-defined]
    assert former is RecordHeldError


def test_importing_the_former_name_works() -> None:
    with pytest.warns(DeprecationWarning):
        from oncefire import ClaimHeldError
    with pytest.warns(DeprecationWarning):
        from oncefire.errors import ClaimHeldError as from_errors
    assert ClaimHeldError is from_errors is RecordHeldError


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = oncefire.NoSuchError
    with pytest.raises(AttributeError):
        _ = oncefire.errors.NoSuchError
