"""What users (and the launch itself) ask of a controller, as typed commands: one frozen class per
command, handed to the controller's thread through its command queue and answered by a Future.

The control socket turns a request into a command with :func:`from_request`, which refuses a
request it cannot read with one line; the window and the CLI make commands directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.run.control import cut_text


@dataclass(frozen=True)
class Launch:
    """Start every host's agent and every role."""


@dataclass(frozen=True)
class Attach:
    """Take over a run's agents again (its roles keep running)."""


@dataclass(frozen=True)
class Detach:
    """Leave the roles running and let go of the agents."""


@dataclass(frozen=True)
class StopRole:
    role: str


@dataclass(frozen=True)
class KillRole:
    role: str


@dataclass(frozen=True)
class RestartRole:
    role: str


@dataclass(frozen=True)
class SignalRole:
    role: str
    signal: str


@dataclass(frozen=True)
class StopAll:
    pass


@dataclass(frozen=True)
class KillAll:
    pass


@dataclass(frozen=True)
class RestartAll:
    pass


@dataclass(frozen=True)
class SetSampling:
    """Every agent's samples on or off, and their period (0.2 to 10 s) when given."""

    on: bool
    period_s: float | None = None


Command = (
    Launch
    | Attach
    | Detach
    | StopRole
    | KillRole
    | RestartRole
    | SignalRole
    | StopAll
    | KillAll
    | RestartAll
    | SetSampling
)

# The control socket's actions that act on the cluster, and what each needs.
_ALL_ACTIONS: dict[str, Command] = {
    "stop_all": StopAll(),
    "kill_all": KillAll(),
    "restart_all": RestartAll(),
    "detach": Detach(),
}
_ROLE_ACTIONS: dict[str, type[StopRole] | type[KillRole] | type[RestartRole]] = {
    "stop": StopRole,
    "kill": KillRole,
    "restart": RestartRole,
}
ACTIONS = frozenset({*_ALL_ACTIONS, *_ROLE_ACTIONS, "signal"})


def from_request(request: dict[str, Any]) -> Command:
    """The command a control-socket request asks for; ValueError with one line saying what is
    wrong (an unknown action, a missing role or signal)."""
    action = request.get("action")
    if action in _ALL_ACTIONS:
        return _ALL_ACTIONS[str(action)]
    role = request.get("role")
    if action in _ROLE_ACTIONS:
        if not isinstance(role, str):
            raise ValueError(f"{action} needs a role, e.g. worker:0")
        return _ROLE_ACTIONS[str(action)](role)
    if action == "signal":
        signal = request.get("signal")
        if not isinstance(role, str) or not isinstance(signal, str):
            raise ValueError("signal needs a role and a signal name")
        return SignalRole(role, signal)
    raise ValueError(f"unknown action {cut_text(str(action), 80)!r}")


def journal_form(command: Command) -> tuple[str, Any]:
    """How the journal has always named a command: (name, argument)."""
    match command:
        case StopRole(role) | KillRole(role) | RestartRole(role):
            names = {StopRole: "stop", KillRole: "kill", RestartRole: "restart"}
            return names[type(command)], role
        case SignalRole(role, signal):
            return "signal", [role, signal]
        case SetSampling(on, period_s):
            return "sampling", [on, period_s]
        case _:
            names_all = {
                Launch: "launch",
                Attach: "attach",
                Detach: "detach",
                StopAll: "stop_all",
                KillAll: "kill_all",
                RestartAll: "restart_all",
            }
            return names_all[type(command)], None
