"""The price table of `oncefire cost`: the shipped defaults, and a file overriding them."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncefire.errors import ConfigError, PriceTableError
from oncefire.features.prices import PriceTable


def test_the_defaults_are_the_documented_list_prices() -> None:
    table = PriceTable.load()
    assert (table.currency, table.source) == ("USD", "defaults")
    assert table.per_million_invocations == 0.20  # AWS Lambda requests
    assert table.per_gb_second == 0.0000166667  # AWS Lambda duration, x86
    assert (table.memory_gb, table.per_cpu_second) == (0.25, 0.0)
    assert (table.per_100k_reads, table.per_100k_writes) == (0.06, 0.18)  # Firestore nam5


def test_a_file_overrides_only_the_keys_it_names(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        'currency = "EUR"\n[store]\nper_100k_reads = 0.03\n[functions.big]\nmemory_gb = 2\n',
        encoding="utf-8",
    )
    table = PriceTable.load(path)
    assert (table.currency, table.per_100k_reads, table.per_100k_writes) == ("EUR", 0.03, 0.18)
    assert table.per_million_invocations == 0.20
    assert (table.memory_of("big"), table.memory_of("other")) == (2.0, 0.25)
    assert table.to_dict()["functions"] == {"big": {"memory_gb": 2.0}}
    assert table.source == str(path)


@pytest.mark.parametrize(
    "text",
    [
        "currency = 3\n",
        "[compute]\nmemory_gb = true\n",
        "[compute]\nmemory_gb = nan\n",
        "store = 1\n",
    ],
)
def test_bad_values_are_a_price_table_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    assert isinstance(caught.value, ConfigError) and "\n" not in str(caught.value)
