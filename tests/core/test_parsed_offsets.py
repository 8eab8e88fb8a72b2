"""parsed.json, where a reattach resumes a role's output: rewritten in place with every chunk that
gave metrics (issue 25), it must always read back as the last record written, whatever it held
before."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.cluster.spec.model import Task
from core.run.rundir import PARSED_FILE, RunDir, read_parsed

TASK = Task("worker", 3, "127.0.0.1", 2222)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**40), st.integers(0, 10**60)), min_size=1, max_size=6))
def test_the_last_record_written_is_read_back_whatever_came_before(records: list[tuple[int, int]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:  # hypothesis runs examples in one test's tmp_path
        run = RunDir(Path(tmp))
        for attempt, end in records:  # huge numbers make records wider than the padding, then narrower
            run.note_parsed(TASK, attempt, end)
            assert read_parsed(run.role_dir(TASK)) == (attempt, end)
        assert run.write_error is None


def test_an_older_parsed_json_is_replaced_and_a_missing_role_folder_made(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.note_parsed(TASK, 1, 5)  # no roles/ folder yet
    assert read_parsed(run.role_dir(TASK)) == (1, 5)
    path = run.role_dir(TASK) / PARSED_FILE
    # As earlier versions wrote it (indented, longer than the padded record): cut, not left as a tail.
    path.write_text(json.dumps({"attempt": 7, "end": 123456789, "note": "x" * 100}, indent=2))
    run.note_parsed(TASK, 8, 1)
    assert read_parsed(run.role_dir(TASK)) == (8, 1)
    assert json.loads(path.read_text()) == {"attempt": 8, "end": 1}
