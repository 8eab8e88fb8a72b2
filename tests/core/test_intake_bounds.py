"""The controller's intake of host samples stays within a bounded cost per sample as hosts and
roles grow (the 1,024-worker simulation runs 128 hosts): a sample looks at its own host's roles,
never at every role of the run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.cluster.spec import parse_text
from core.controller.connections import HostConnections
from core.controller.intake import TelemetryIntake
from core.controller.roles import RoleMachine
from core.controller.stalls import StallWatch
from core.diagnosis.rules import Diagnoser
from core.run.publish import Publisher
from core.run.rundir import RunDir

HOSTS = 32
PER_HOST = 8


def _intake(tmp_path: Path) -> tuple[TelemetryIntake, HostConnections, RoleMachine]:
    tasks = ", ".join(f'"127.0.0.{h + 1}:{3000 + h * PER_HOST + i}"' for h in range(HOSTS) for i in range(PER_HOST))
    spec, problems = parse_text(
        f'strategy = "custom"\ncommand = ["python", "x.py"]\n[jobs.worker]\ntasks = [{tasks}]\n'
    )
    assert spec is not None, problems
    run = RunDir.create(spec, root=tmp_path / "runs")
    roles = RoleMachine(spec, run.path, Publisher(), on_changed=lambda _role, _now: None)

    def no_transport(*_args: object) -> object:
        raise AssertionError("nothing connects here")

    hosts = HostConnections(
        run,
        lambda _host, _event: None,
        threading.Event(),
        factory=no_transport,  # type: ignore[arg-type]
        remote_hosts=frozenset(),
    )
    diagnoser = Diagnoser([r.task.role_id for r in roles])
    stalls = StallWatch(lambda: spec, roles, diagnoser, on_step=lambda _r, _s: None, on_stall=lambda _r, _d: None)
    return TelemetryIntake(run, roles, hosts, stalls, Publisher()), hosts, roles


def _sample(host: str) -> dict[str, object]:
    return {"ev": "sample", "t": 1000.0, "host": {"cpu_percent": 5.0}, "roles": {}, "gpus": []}


@pytest.mark.parametrize("tailing", [True, False], ids=["agents-tail-tensorboard", "controller-reads-it"])
def test_a_host_sample_looks_at_that_host_s_roles_not_at_every_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tailing: bool
) -> None:
    """Every host's sample asked, for every role of the run, whether its TensorBoard files were
    the controller's to read: hosts x roles a sample period (8,192 at 256 workers on 32 hosts,
    131,072 at 1,024 on 128), each agent of today saying it reads them itself."""
    intake, hosts, roles = _intake(tmp_path)
    host_keys = sorted({r.host_key for r in roles})
    assert len(host_keys) == HOSTS
    for host in host_keys:
        hosts.hello(host, tails_tensorboard=tailing)
    asked: list[str] = []
    real = HostConnections.tails_tensorboard

    def counted(self: HostConnections, host: str) -> bool:
        asked.append(host)
        return real(self, host)

    monkeypatch.setattr(HostConnections, "tails_tensorboard", counted)
    for role in roles:  # where the controller reads a role's files: made on first poll
        assert role.tensorboard is None
    for host in host_keys:  # one sample period: a sample from each host
        intake.on_sample(host, _sample(host))
    monkeypatch.undo()
    polled = [r.task.role_id for r in roles if r.tensorboard is not None]
    if tailing:
        assert len(asked) == HOSTS, len(asked)  # one question a sample (before: 32 x 256 = 8,192)
        assert polled == []
    else:
        assert len(asked) <= HOSTS * (1 + PER_HOST), len(asked)
        assert sorted(polled) == sorted(r.task.role_id for r in roles)  # each read once a period
