"""The config reference is generated from the schema (jobs.contract.configdoc): the README's table is that
output, the example is a valid config at the defaults, and every config error carries a fix."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import ROOT
from jobs import cli
from jobs.contract import configdoc
from jobs.contract.config import ConfigError, TargetConfig, parse_config

START, END = "<!-- config-table:start (autoresearch config --markdown) -->", "<!-- config-table:end -->"


def test_readme_table_is_the_schemas():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert START in readme and END in readme, "README lost its generated config table markers"
    table = readme.split(START, 1)[1].split(END, 1)[0].strip() + "\n"
    assert table == configdoc.markdown_table(), \
        "README's config table differs from the schema: replace it with `autoresearch config --markdown`"


def test_every_field_has_a_row_and_required_ones_say_so():
    paths = {row[0]: row for row in configdoc.rows()}
    for name, field in TargetConfig.model_fields.items():
        assert name in paths
        assert (paths[name][2] == "**required**") == field.is_required()
    assert {"build", "benchmark", "checks", "metrics", "editable"} == \
        {p for p, _, d, _ in configdoc.rows() if d == "**required**" and "." not in p}
    assert all(what for _, _, _, what in configdoc.rows() if "." not in _), "a top-level field lacks a description"


def test_the_example_is_a_valid_config_at_the_defaults():
    text = configdoc.example_yaml()
    assert parse_config(text) == TargetConfig.model_validate(configdoc.REQUIRED_EXAMPLE)
    assert set(yaml.safe_load(text)) == set(TargetConfig.model_fields)       # every field is shown


def test_schema_is_json_schema_of_the_model(capsys):
    assert cli.main(["config", "--schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["required"]) == {"build", "benchmark", "checks", "metrics", "editable"}
    assert set(schema["properties"]) == set(TargetConfig.model_fields)


GOOD = "build: make\nbenchmark: ./b\nchecks: ./c\nmetrics: [{name: t, primary: true}]\neditable: [src/**]\n"


@pytest.mark.parametrize("extra", ["repeats: {max: lots}", "timeouts: {build: -1}", "sandbox: {enabled: maybe}",
                                   "budget: 5", "editable: src", "name: [a]", "repeats: {max: 2.5}",
                                   "metrics: [{name: t, primary: true, clock: gpu}]", "colour: blue",
                                   "research: {roofline: {model_bytes: 1}}"])
def test_every_config_error_has_a_fix(extra):
    with pytest.raises(ConfigError) as err:
        parse_config(GOOD + extra + "\n")
    problems = err.value.problems
    assert problems and all(re.search(r"; fix: \S", msg) for _, msg in problems), problems
