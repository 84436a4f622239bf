import pytest

from jobs.contract.config import ConfigError, load_config, parse_config

GOOD = """
build: make
benchmark: ./bench.sh
checks: ./checks.sh
metrics:
  - {name: tg, primary: true}
  - {name: ms, direction: lower}
editable: ["src/**"]
platforms: [x86, arm]
"""


def test_good_config_and_defaults():
    c = parse_config(GOOD)
    assert c.primary.name == "tg" and c.metric("ms").direction == "lower"
    assert [p.name for p in c.platforms] == ["x86", "arm"]
    assert c.thresholds.alpha == 0.05 and c.repeats.warmup == 1


@pytest.mark.parametrize("mutation, field, words", [
    (GOOD.replace("build: make\n", ""), "build", "add it"),
    (GOOD.replace("primary: true", "primary: false"), "metrics", "exactly one metric needs 'primary: true'"),
    (GOOD.replace("direction: lower", "direction: down"), "metrics.1.direction", "'higher' or 'lower'"),
    (GOOD + "repeats: {min: 10, max: 5}\n", "repeats", "max (5) must be >= min (10)"),
    (GOOD + "budgett: {usd: 3}\n", "budgett", "remove it or check its spelling"),
    (GOOD + "thresholds: {alpha: 2}\n", "thresholds.alpha", "less than 0.5"),
    (GOOD.replace('editable: ["src/**"]', "editable: []"), "editable", "at least 1"),
    (GOOD + "sanity: {inverse_pairs: [{a: tg, b: nope, product: 1000}]}\n", "inverse_pairs", "'nope'"),
])
def test_bad_config_names_field_and_fix(mutation, field, words):
    with pytest.raises(ConfigError) as err:
        parse_config(mutation, source="repo/.github/autoresearch.yml")
    text = str(err.value)
    assert text.startswith("repo/.github/autoresearch.yml: invalid autoresearch config")
    assert field in text and words in text


def test_yaml_syntax_error_has_position():
    with pytest.raises(ConfigError, match=r"line \d+, column \d+.*not valid YAML"):
        parse_config("build: [unclosed\n")


def test_not_a_mapping():
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse_config("- just a list\n")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found; create .github/autoresearch.yml"):
        load_config(tmp_path)
