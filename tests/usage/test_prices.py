"""usage.prices: the dated table, model matching, the override file, cost_usd."""

from __future__ import annotations

import json

import pytest

from ctxpatch.errors import UsageError
from usage import prices
from usage.prices import Price, Usage, cost_usd, load_table


def test_table_is_dated_and_every_price_positive():
    t = prices.builtin_table()
    assert len(t.date) == 10 and t.date[4] == "-" and t.source.startswith("https://")
    for name, p in t.models.items():
        assert all(v > 0 for v in p.as_dict().values()), name
        assert p.output > p.input > p.cache_read  # the published structure


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-opus-4-6", "claude-opus-4-6"),
        ("claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("opus", "claude-opus-5-5"),
        ("Sonnet", "claude-sonnet-5-5"),
    ],
)
def test_model_matching_longest_prefix(model, key):
    t = prices.builtin_table()
    assert t.lookup(model) == t.models[key]


def test_opus_4_1_is_not_priced_as_opus_4_5():
    t = prices.builtin_table()
    assert t.lookup("claude-opus-4-1").input == 15.0
    assert t.lookup("claude-opus-4-5").input == 5.0


def test_unknown_model_has_no_price():
    assert cost_usd({"input_tokens": 10}, "gpt-9") is None
    assert cost_usd({"input_tokens": 10}, None) is None


def test_cost_of_api_usage_by_hand():
    usage = {
        "input_tokens": 2_000,
        "cache_creation_input_tokens": 300_000,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 100_000,
            "ephemeral_1h_input_tokens": 200_000,
        },
        "cache_read_input_tokens": 1_000_000,
        "output_tokens": 4_000,
    }
    # opus 4.6: 5 / 6.25 / 10 / 0.5 / 25 USD per MTok
    want = (2_000 * 5 + 100_000 * 6.25 + 200_000 * 10 + 1_000_000 * 0.5 + 4_000 * 25) / 1e6
    assert cost_usd(usage, "claude-opus-4-6") == pytest.approx(want)


def test_cache_creation_without_split_is_5_minute():
    u = Usage.from_api(
        {"cache_creation_input_tokens": 7, "input_tokens": True, "output_tokens": -3}
    )
    assert u == Usage(cache_write_5m=7)  # bools and negatives are not numbers of tokens


def test_override_file_replaces_and_adds(tmp_path, monkeypatch):
    f = tmp_path / "p.toml"
    f.write_text(
        'date = 2027-01-02\n[models."claude-opus-4-6"]\ninput = 1\ncache_write_5m = 2\n'
        'cache_write_1h = 3\ncache_read = 0.5\noutput = 4\n[models."my-model"]\ninput = 1\n'
        "cache_write_5m = 1\ncache_write_1h = 1\ncache_read = 1\noutput = 1\n"
    )
    t = load_table(f)
    assert t.date == "2027-01-02"
    assert t.lookup("claude-opus-4-6") == Price(1, 2, 3, 0.5, 4)
    assert t.lookup("my-model-20270101") == Price(1, 1, 1, 1, 1)
    assert t.lookup("claude-haiku-4-5") == prices.BUILTIN["claude-haiku-4-5"]  # the rest stays
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"models": {"x": dict.fromkeys(Price.__dataclass_fields__, 2)}}))
    monkeypatch.setenv(prices.PRICES_ENV, str(j))
    assert load_table().lookup("x") == Price(2, 2, 2, 2, 2)
    assert cost_usd({"output_tokens": 1_000_000}, "x", load_table()) == 2.0


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("models = 3", "`models` is not a table"),
        ("[models.a]\ninput = 1", "missing"),
        (
            "[models.a]\ninput = -1\ncache_write_5m = 1\ncache_write_1h = 1\ncache_read = 1\noutput = 1",
            ">= 0",
        ),
        ("= =", "not valid TOML"),
    ],
)
def test_bad_override_file_is_a_clear_usage_error(tmp_path, text, why):
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(UsageError) as e:
        load_table(f)
    assert why in e.value.why and str(f) in e.value.what and e.value.hint


def test_missing_override_file(tmp_path):
    with pytest.raises(UsageError, match="price file"):
        load_table(tmp_path / "nope.toml")
