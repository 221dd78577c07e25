"""Plain scalars and keys read as go-yaml v2 (resolve.go, v2.4) and sigs.k8s.io/yaml's JSON step do.

Each row is a fact about that pipeline; where PyYAML's own YAML 1.1 resolver reads the text
differently the row says so, since that is exactly what the loader must not inherit.
"""

from __future__ import annotations

import math

import pytest

from migagent.layout.goyaml_resolve import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    STR,
    TIMESTAMP,
    ScalarTagError,
    YamlTimestamp,
    construct_scalar,
    go_float32_key,
    go_resolve,
)


@pytest.mark.parametrize(
    ("text", "tag", "value"),
    [
        # Booleans: YAML 1.1's full set, including the one-letter forms PyYAML reads as strings.
        ("y", BOOL, True), ("Y", BOOL, True), ("yes", BOOL, True), ("On", BOOL, True), ("TRUE", BOOL, True),
        ("n", BOOL, False), ("N", BOOL, False), ("no", BOOL, False), ("OFF", BOOL, False), ("False", BOOL, False),
        ("yEs", STR, "yEs"), ("tRue", STR, "tRue"),
        # Null.
        ("~", NULL, None), ("null", NULL, None), ("NULL", NULL, None), ("nUll", STR, "nUll"),
        # Integers: ParseInt(s, 0, 64) after removing every underscore.
        ("7", INT, 7), ("+7", INT, 7), ("-7", INT, -7), ("0x1F", INT, 31), ("0X1f", INT, 31),
        ("0o17", INT, 15),  # PyYAML: a string
        ("017", INT, 15), ("0b101", INT, 5), ("-0b101", INT, -5), ("1_000", INT, 1000), ("0x_1F", INT, 31),
        ("1__0", INT, 10), ("_1", STR, "_1"),
        ("18446744073709551615", INT, 2**64 - 1),  # past int64: ParseUint takes it
        # Floats: go-yaml v2's pattern needs no dot, so these are floats where PyYAML has strings.
        ("1e3", FLOAT, 1000.0), ("7.0", FLOAT, 7.0), ("08", FLOAT, 8.0), ("1.", FLOAT, 1.0), (".5", FLOAT, 0.5),
        ("-1.5e-3", FLOAT, -1.5e-3), ("1_0.5", FLOAT, 10.5),
        ("1e999", STR, "1e999"),  # ParseFloat's range error leaves the text a string
        (".5_0", STR, ".5_0"),  # a leading dot goes to ParseFloat as written, which refuses '_'
        # Base 60 was dropped: PyYAML reads 1:30 as 90.
        ("1:30", STR, "1:30"),
        # Not numbers at all.
        ("1g.10gb", STR, "1g.10gb"), ("0x20B010DE:0x16C010DE", STR, "0x20B010DE:0x16C010DE"), ("v1", STR, "v1"),
        ("<<", STR, "<<"), ("all", STR, "all"), ("Infinity", STR, "Infinity"), ("NaN", STR, "NaN"),
    ],
)
def test_a_plain_scalar_reads_as_go_yaml_v2_reads_it(text: str, tag: str, value: object) -> None:
    assert go_resolve(text) == (tag, value)


@pytest.mark.parametrize("text", [".inf", "+.Inf", "-.INF", ".nan", ".NaN"])
def test_infinities_and_nan_are_floats(text: str) -> None:
    tag, value = go_resolve(text)
    assert tag == FLOAT
    assert isinstance(value, float)
    assert not math.isfinite(value)


@pytest.mark.parametrize("text", ["2024-01-31", "2024-1-2", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10"])
def test_dates_read_as_timestamps_which_are_never_strings(text: str) -> None:
    assert go_resolve(text) == (TIMESTAMP, YamlTimestamp(text))


@pytest.mark.parametrize("text", ["2024-13-01", "24-01-31", "2024-01-31x"])
def test_text_that_only_looks_like_a_date_is_not_a_timestamp(text: str) -> None:
    assert go_resolve(text)[0] != TIMESTAMP


@pytest.mark.parametrize(
    ("tag", "text", "value"),
    [(INT, "7", 7), (FLOAT, "7", 7.0), (STR, "7", "7"), (BOOL, "y", True), (NULL, "~", None), (STR, "yes", "yes")],
)
def test_an_explicit_tag_reads_the_text_as_that_type(tag: str, text: str, value: object) -> None:
    assert construct_scalar(tag, text) == value
    assert type(construct_scalar(tag, text)) is type(value)


@pytest.mark.parametrize(("tag", "text"), [(INT, "abc"), (BOOL, "1"), (NULL, "x"), (INT, "1.5")])
def test_an_explicit_tag_the_text_does_not_fit_is_refused(tag: str, text: str) -> None:
    with pytest.raises(ScalarTagError, match="cannot read"):
        construct_scalar(tag, text)


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (1.0, "1"), (1.5, "1.5"), (0.1, "0.1"), (1000.0, "1000"), (123456.0, "123456"), (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5, "-2.5"), (0.0, "0"),
        (math.inf, ".inf"), (-math.inf, "-.inf"), (math.nan, ".nan"), (1e300, ".inf"),
        (16777217.0, "1.6777216e+07"),  # float32 precision: the key is the float32's digits
    ],
)
def test_a_float_key_is_written_as_go_formats_a_float32_shortest(value: float, key: str) -> None:
    assert go_float32_key(value) == key
