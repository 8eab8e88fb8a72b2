"""core.cluster.spec.write's TOML writer: TOML a person can read, that reads back to the same data."""

from __future__ import annotations

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from core.cluster.spec.write import data_to_toml as dumps
from tests.helpers.project import ROOT
from tests.helpers.textcheck import raw_controls

scalars = (
    st.text(max_size=20)
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), values, max_size=5))
def test_any_plain_data_reads_back_equal(data):
    text = dumps(data)
    assert tomllib.loads(text) == data
    # `import` prints it and the editor shows it: no control character, C1 or bidi override raw.
    assert raw_controls(text) == [], text


def test_bundled_cluster_files_read_back_equal():
    for path in sorted((ROOT / "resources").glob("*.toml")):
        data = tomllib.loads(path.read_text())
        assert tomllib.loads(dumps(data)) == data, path


def test_a_cluster_reads_like_one_written_by_hand():
    text = dumps(
        {
            "name": "demo",
            "command": ["python", "-u", "train.py"],
            "metric_patterns": [r"iter (?P<step>\d+)"],
            "env": {"A": "1"},
            "jobs": {
                "ps": {"tasks": ["127.0.0.1:2222"], "restart": {"policy": "OnFailure", "max_restarts": 3}},
                "worker": {
                    "gpus": [0, 1],
                    "tasks": ["127.0.0.1:2223", {"address": "127.0.0.1:2224", "gpus": [1], "env": {"X": "y"}}],
                },
            },
        }
    )
    assert text == (
        'name = "demo"\n'
        'command = ["python", "-u", "train.py"]\n'
        "metric_patterns = ['iter (?P<step>\\d+)']\n"
        "\n"
        "[env]\n"
        'A = "1"\n'
        "\n"
        "[jobs.ps]\n"
        'tasks = ["127.0.0.1:2222"]\n'
        'restart = { policy = "OnFailure", max_restarts = 3 }\n'
        "\n"
        "[jobs.worker]\n"
        "gpus = [0, 1]\n"
        "tasks = [\n"
        '    "127.0.0.1:2223",\n'
        '    { address = "127.0.0.1:2224", gpus = [1], env = { X = "y" } },\n'
        "]\n"
    )


def test_inline_tables_stay_on_one_line_whatever_they_hold():
    data = {"jobs": {"worker": {"restart": {"tasks": [{"a": 1}], "long": list(range(60)), "t": {"u": [{"v": 2}]}}}}}
    text = dumps(data)
    assert tomllib.loads(text) == data
    [line] = [line for line in text.splitlines() if line.startswith("restart = {")]
    assert line.endswith("}")


def test_a_cluster_table_is_ordered_like_the_bundled_files_and_keeps_unknown_keys():
    from core.cluster.spec import parse_text, toml_text

    data = {
        "hosts": {"10.0.0.2": {"ssh": "me@gpu-1"}},
        "jobs": {"wrker": {"tasks": ["10.0.0.2:1"]}, "worker": {"tasks": ["10.0.0.2:2"]}, "ps": {"tasks": ["h:3"]}},
        "env": {"A": "1"},
        "nmae": "typo",
        "name": "c",
    }
    text = toml_text(data)
    assert tomllib.loads(text) == data  # the typos too: nothing the user typed is lost
    headers = [line for line in text.splitlines() if line.startswith("[")]
    assert headers == ["[env]", "[jobs.ps]", "[jobs.worker]", "[jobs.wrker]", '[hosts."10.0.0.2"]']
    assert text.startswith('nmae = "typo"\nname = "c"\n')
    _spec, problems = parse_text(text)
    assert {p.field for p in problems} >= {"nmae", "jobs.wrker"}
