"""Large layout files: read whatever their size when written out in full, refused only for what
aliases add; at most 20 problems shown, the rest counted; libyaml's parser (the fast path) reads
every file exactly as the Python loader does."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.layout_gen import SHIPPED, generate
from migagent.errors import InvalidLayoutError
from migagent.layout.parse import MAX_REPORTED_PROBLEMS, parse_layout
from migagent.layout.strict_yaml import JsonKey, YamlSyntaxError, load_strict

DATA = Path(__file__).parent / "data"
HEAD = "version: v1\nmig-configs:\n"


def test_a_plain_file_of_more_values_than_the_alias_budget_loads() -> None:
    # 30,000 configs of 7 values each: 210,000 values, more than the 200,000 aliases may add.
    text = HEAD + "".join(f"  c{i}: [{{devices: all, mig-enabled: false}}]\n" for i in range(30_000))
    layout = parse_layout(text, source="big.yaml")
    assert len(layout.configs) == 30_000


def test_a_large_file_with_a_few_aliases_loads_and_the_aliases_still_count() -> None:
    anchor = "  c0: &entries [{devices: all, mig-enabled: false}]\n"
    text = HEAD + anchor + "".join(f"  c{i}: *entries\n" for i in range(1, 30_000))
    assert len(parse_layout(text, source="aliased.yaml").configs) == 30_000  # 29,999 x 4 values through aliases
    text = HEAD + anchor + "".join(f"  c{i}: *entries\n" for i in range(1, 60_000))
    with pytest.raises(InvalidLayoutError, match="expands to more than 200000 values through aliases"):
        parse_layout(text, source="aliased.yaml")


def test_a_generated_megabyte_file_loads_with_every_config() -> None:
    layout = parse_layout(generate(1_000_000), source="1mb.yaml")
    assert len(layout.configs) > 4000


def test_only_the_first_problems_are_shown_and_the_rest_counted() -> None:
    text = HEAD + "".join(f"  c{i}: [{{devices: all, mig-enabled: maybe}}]\n" for i in range(25))
    with pytest.raises(InvalidLayoutError) as info:
        parse_layout(text, source="bad.yaml")
    lines = str(info.value).splitlines()
    assert len(lines) == MAX_REPORTED_PROBLEMS + 1
    assert lines[0].startswith("bad.yaml: mig-configs.c0[0].mig-enabled: expected true or false")
    assert lines[-1] == f"bad.yaml: ... and {25 - MAX_REPORTED_PROBLEMS} more problem(s) not shown"


SNIPPETS = [
    HEAD + '  c:\n    - {"devices": "all",\t"mig-enabled": false}\n',
    '{\n\t"version": "v1",\n\t"mig-configs": {"c": [{"devices": [0, 1], "mig-enabled": false},]}\n}\n',
    HEAD + "  base: &b\n    - {devices: all, mig-enabled: yes, mig-devices: {1g.10gb: 0x7}}\n  copy: *b\n",
    HEAD + "  a: &x [{devices: all, mig-enabled: off}]\n  b: &x [{devices: [07], mig-enabled: n}]\n  c: *x\n",
    HEAD + "  c:\n    - <<: {devices: all}\n      mig-enabled: false\n",
    HEAD + "  1: [{devices: all, mig-enabled: false}]\n  on: [{devices: all, mig-enabled: false}]\n",
    HEAD + "  c: [{devices: all, mig-enabled: false, devices: all}]\n",
    HEAD + "  c: [{devices: all, mig-enabled: false}]\n---\nversion: v1\n",
    HEAD + "  c: [{devices: !!binary aGk=, mig-enabled: false}]\n",
    HEAD + "  c: [{devices: 2024-01-31, mig-enabled: false}]\n",
    HEAD + '  c: [{devices: "\\/", mig-enabled: false}]\n',
    HEAD + "  c: [{devices: all, mig-enabled: false}\n",
    HEAD + "  c:\n\t- {devices: all}\n",
]


def _shape(value: object) -> object:
    """The data with each key's kind and spelling, which the two loaders must also agree on."""
    if isinstance(value, dict):
        return [((str(k), k.kind, k.spelling) if isinstance(k, JsonKey) else k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return (type(value).__name__, value)


def _outcome(text: str, *, libyaml: bool) -> object:
    try:
        data, problems = load_strict(text, libyaml=libyaml)
    except YamlSyntaxError as exc:
        return str(exc)
    return _shape(data), problems


@pytest.mark.parametrize(
    "text",
    [
        *SNIPPETS,
        SHIPPED.read_text(encoding="utf-8"),
        *(path.read_text(encoding="utf-8") for path in sorted(DATA.glob("*.yaml"))),
    ],
)
def test_libyaml_reads_every_file_as_the_python_loader_does(text: str) -> None:
    assert _outcome(text, libyaml=True) == _outcome(text, libyaml=False)
