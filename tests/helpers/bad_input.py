"""Hypothesis strategies for bad input: the example cluster files mutated with the pieces TOML and
the validator care about, words of a pasted command line, JSON-ish values for TF_CONFIG."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.helpers.project import ROOT

EXAMPLES = sorted((ROOT / "resources").glob("*.toml"))


SEED_TEXTS = [p.read_text() for p in EXAMPLES]


# Pieces that TOML and the validator care about: quotes, brackets, numbers at the edges.
TOKENS = [
    "=", "[", "]", "[[", "{", "}", '"', "'", '"""', ",", ".", "\n", "#", "\\", "\0", "\x7f", "-1", "0", "1e999",
    "nan", "inf", "-inf", "true", "99999999999999999999", "1979-05-27", "[jobs.ps]", "[jobs.worker]", "[jobs.x]",
    "tasks = []", 'tasks = ["127.0.0.1:0"]', 'tasks = ["h:99999"]', 'tasks = [{ address = 5 }]', "gpus = [-1]",
    "gpus = [1, 1]", 'command = ""', "command = []", 'command = "\'unterminated"', 'restart = { policy = "x" }',
    "restart = { max_restarts = -1 }", "restart = 3", 'strategy = "custom"', "stall_after_s = -5",
    'metric_patterns = ["(?P<step"]', 'metric_patterns = ["(?P<x>a)"]', 'env = { "A B" = "x" }', "env = 5",
    'complete_when = ["nope"]', "jobs = 1", "é", "\ud7ff", "{port}", "{nope}",
]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, seeds: list[str]) -> str:
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        piece = draw(st.sampled_from(TOKENS) | st.text(max_size=8))
        text = text[:i] + piece + text[j:] if draw(st.booleans()) else text[:i] + text[j:]
    return text


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["127.0.0.1:2222", "h:1", ":80", "x:-1", "python", "OnFailure", "Never", "ps", "worker"])
)


FLAG_WORDS = st.sampled_from(
    [
        "python", "train.py", "--ps_hosts", "--ps_hosts=", "--worker_hosts=h:1,h:2", "--worker_hosts", "--job_name=ps",
        "--task_index=0", "--task_index", "h:2222", ",", "'", '"', "\\", "--chief_hosts=x", "--evaluator_hosts=:9",
        "--worker_hosts=h:99999", "--worker_hosts=,,", "$(touch x)", "--ps_hosts=a:1,a:1",
    ]
)  # fmt: skip


JSONISH = st.recursive(
    SCALARS | st.sampled_from(["h:2222", "127.0.0.1:1"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["cluster", "task", "worker", "ps", "chief", "type", "index"]) | st.text(max_size=5),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
