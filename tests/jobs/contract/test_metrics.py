from jobs.contract.metrics import explain_missing, missing_metrics, parse_metrics


def test_basic_and_last_value_wins():
    out = "noise\nMETRIC tg=10.5\nMETRIC pp=3\nMETRIC tg=12\n"
    assert parse_metrics(out).values == {"tg": 12.0, "pp": 3.0}


def test_names_with_dots_and_micro_and_trailing_space():
    p = parse_metrics("METRIC lat.p99_µs=1.5e3  \r\nMETRIC   x=-2\n")
    assert p.values == {"lat.p99_µs": 1500.0, "x": -2.0}


def test_non_finite_and_garbage_rejected_with_line_numbers():
    p = parse_metrics("METRIC a=1\nMETRIC a=nan\nMETRIC b=inf\nMETRIC c=abc\nMETRIC d = 1\nMETRICe=1\n")
    assert p.values == {}   # a non-finite last value must not leave the earlier a=1 standing
    reasons = {line: reason for line, _, reason in p.rejected}
    assert "not finite" in reasons[2] and "not finite" in reasons[3]
    assert "not a number" in reasons[4]
    assert "not of the form" in reasons[5] and "not of the form" in reasons[6]


def test_value_must_be_one_token_and_line_anchored():
    p = parse_metrics("  METRIC a=1\nMETRIC b=1 tok/s\nprefix METRIC c=1\n")
    assert p.values == {}
    assert [r[0] for r in p.rejected] == [2]


def test_missing_explained():
    p = parse_metrics("METRIC tg=nan\n")
    assert missing_metrics(p, ["tg", "pp"]) == ["tg", "pp"]
    assert "not finite" in explain_missing(p, "tg")
    assert "never printed" in explain_missing(p, "pp")
