"""``{python}`` in a command (issue 19): TowerDeck's own interpreter for a role on this machine
(the demo launched as `.venv/bin/python main.py --demo` with no venv active ran a `python`
without TensorFlow), the host's python for a remote role; and a local command whose python
cannot find what its script imports is said before the launch, in `validate` and the pre-flight."""

from __future__ import annotations

import sys
from pathlib import Path

from core.cluster.demo import DEMO_CLUSTER
from core.cluster.problems import WARNING
from core.cluster.render import render
from core.cluster.spec import load
from core.preflight.checks import check_local
from core.preflight.runner import check_host
from tests.helpers.ports import free_ports

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, without the project's packages


def _cluster(tmp_path: Path, command: str, script: str = "trainer.py", imports: str = "import json\n") -> Path:
    (tmp_path / script).write_text(imports + "print('Step: 1,  Cost: 1.0')\n")
    ports = free_ports(3)
    path = tmp_path / "c.toml"
    path.write_text(
        f"""name = "p"
strategy = "between_graph"
workdir = "{tmp_path}"
command = [{command}, "-u", "{script}"]
[jobs.ps]
tasks = ["127.0.0.1:{ports[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{ports[1]}", "10.99.0.2:{ports[2]}"]
[hosts."10.99.0.2"]
ssh = "me@gpu-node"
python = "/opt/conda/bin/python"
"""
    )
    return path


def test_python_is_towerdeck_s_own_here_and_the_host_s_python_there(tmp_path: Path) -> None:
    spec, problems = load(_cluster(tmp_path, '"{python}"'))
    assert spec is not None, problems
    local, remote = spec.jobs["worker"].tasks
    assert render(spec, local).argv[:3] == (sys.executable, "-u", "trainer.py")
    assert render(spec, remote).argv[0] == "/opt/conda/bin/python"
    demo, problems = load(DEMO_CLUSTER)
    assert demo is not None, problems
    assert demo.command[0] == "{python}"
    assert {render(demo, t).argv[0] for t in demo.tasks()} == {sys.executable}
    assert check_local(demo, check_ports=False) == []  # the demo's script imports what this python has


def test_a_local_python_that_cannot_import_the_trainer_s_modules_is_said_before_the_launch(tmp_path: Path) -> None:
    imports = "import json\nimport psutil\nfrom numpy import linalg\ntry:\n    import not_needed_xyz\nexcept ImportError:\n    pass\n"
    spec, problems = load(_cluster(tmp_path, f'"{SYSTEM_PYTHON}"', imports=imports))
    assert spec is not None, problems
    found = check_local(spec, check_ports=False)
    assert [(p.severity, p.field) for p in found] == [(WARNING, "command")]
    assert "cannot import psutil, numpy, which trainer.py imports" in found[0].message
    assert "{python}" in found[0].hint
    # The same command with {python} finds them all.
    spec, problems = load(_cluster(tmp_path, '"{python}"', imports=imports))
    assert spec is not None, problems
    assert check_local(spec, check_ports=False) == []

    # The pre-flight of this machine fails its imports check, with the fix.
    spec, problems = load(_cluster(tmp_path, f'"{SYSTEM_PYTHON}"', imports=imports))
    assert spec is not None, problems
    result = check_host(spec, "127.0.0.1", timeout_s=60, check_ports=False)
    imports_check = next(c for c in result.checks if c.name == "imports")
    assert imports_check.ok is False and "cannot import psutil, numpy" in imports_check.detail
    assert "{python}" in imports_check.fix
