"""Why is this worker slow, asked of a running launch: the steps that ``ctl RUN why`` and the
window's *Role > Why is this worker slow?* share.

From the run's live status (the control socket's ``status`` role list), :func:`why_slow` picks the
straggler (the named worker, else the slowest) and the median worker, captures both at once
(:func:`core.profiling.capture.capture`), computes the capture's one breakdown and keeps it with the
capture (:func:`core.profiling.breakdown.breakdown_after`) and applies the rules of
:mod:`core.profiling.why` to it; the verdict is kept with the capture (``why.json``,
:mod:`core.profiling.why_record`), so every view shows the verdict beside the figures it rests on. It blocks for the capture and the summary
(seconds): the window calls it off the GUI thread.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from core.profiling.breakdown import breakdown_after
from core.profiling.capture import Capture, capture, select
from core.profiling.env import ProfileError
from core.profiling.summary import RoleProfile
from core.profiling.why import RoleFacts, Verdict, explain, local_host_facts, role_facts, straggler_and_median
from core.profiling.why_gpus import look_at_gpus
from core.profiling.why_record import WhyRecord, save_why
from core.run.status import RoleStatus


class WhyRefused(ProfileError):
    """The question cannot be asked of this run (no two running workers, not a worker, ...):
    one line, said before anything was captured."""


@dataclass(frozen=True)
class WhyAnswer:
    """The outcome of one question: the straggler and the median worker it was compared with, the
    capture, and, once both were captured and summarised, their profiles (straggler first) and the
    verdict. Without a verdict, ``failures`` and ``problem`` say why. ``profiles`` are the
    capture's breakdown, as every view of the capture shows it."""

    straggler: str
    median: str
    capture: Capture
    profiles: tuple[RoleProfile, ...] = ()
    verdict: Verdict | None = None
    problem: str | None = None  # the summary failed after the capture, or the verdict was not kept

    @property
    def failures(self) -> list[str]:
        """Each role that was not captured, with why (one line each)."""
        return [r.error for r in self.capture.roles if not r.ok and r.error]

    def refusal(self) -> str:
        """Why there is no verdict, in one line ('' when there is one)."""
        if self.verdict is not None:
            return ""
        return "; ".join([*self.failures, *([self.problem] if self.problem else [])]) or "fewer than two roles captured"


def why_slow(
    roles: Sequence[RoleStatus],
    run_path: Path,
    name: str | None = None,
    *,
    seconds: float = 2.0,
    light: bool = False,
    timeout_s: float | None = None,
    unsafe: bool = False,
    agent_hosts: Collection[str] = (),
    control_socket: Path | None = None,
    origin: str = "",
) -> WhyAnswer:
    """Profile the straggler (``name``, else the slowest worker of ``roles``) beside the median
    worker and explain the difference. Roles of ``agent_hosts`` (SSH hosts, Slurm nodes) are
    traced there by their agent through the launcher at ``control_socket``, their files brought
    into this run directory. ``origin`` ("window", "cli") is kept with the capture, to list it by.
    Raises :class:`WhyRefused` when the workers cannot be chosen and
    ProfileError when the capture cannot start; a role not captured or a summary that fails is in
    the answer (no verdict)."""
    try:
        slow, median = straggler_and_median(roles, name)
        targets = select(roles, [slow.role, median.role], workers=False, every=False, agent_hosts=agent_hosts)
    except ProfileError as exc:
        raise WhyRefused(str(exc)) from None
    import psutil

    psutil.cpu_percent(None)  # this host's CPU is measured over the capture
    result = capture(
        run_path,
        targets,
        seconds=seconds,
        light=light,
        timeout_s=timeout_s,
        unsafe=unsafe,
        control_socket=control_socket,
        purpose="why",
        origin=origin,
    )
    host_cpu = psutil.cpu_percent(None)
    if len(result.xplanes()) < 2:
        return WhyAnswer(slow.role, median.role, result)
    # This machine's load and GPUs say nothing of a role its agent traced elsewhere (an SSH host, a
    # Slurm node, even one whose address is 127.0.0.1): no host or GPU figures for it.
    here = {t.role for t in targets if not t.by_agent}
    gpus = look_at_gpus([r for r in (slow, median) if r.role in here], run_path)  # temperature, clocks...
    for r in (slow, median):
        if r.role not in here and r.gpus:
            gpus[r.role] = ((), f"not looked at: {r.host} is reached through its agent")
    slow_facts, median_facts = (
        role_facts(
            r,
            local_host_facts(r.host, host_cpu) if r.role in here else None,
            gpus.get(r.role, ((), None)),
        )
        for r in (slow, median)
    )
    return judge(result, slow_facts, median_facts)


def judge(result: Capture, slow_facts: RoleFacts, median_facts: RoleFacts) -> WhyAnswer:
    """The answer on a capture of the straggler (``slow_facts.role``) and the median worker: the
    capture's one breakdown, computed and kept with it, the verdict given on that breakdown, and
    the verdict kept with it too (``why.json``)."""
    answer = WhyAnswer(slow_facts.role, median_facts.role, result)
    try:
        found = breakdown_after(result)
    except ProfileError as exc:
        return replace(answer, problem=f"captured, but {exc}")
    by_role = {p.role: p for p in found.profiles} if found is not None else {}
    if answer.straggler not in by_role or answer.median not in by_role:
        return replace(answer, problem="captured, but xprof gave no profile of both workers")
    profiles = (by_role[answer.straggler], by_role[answer.median])
    verdict = explain(profiles[0], profiles[1], slow_facts=slow_facts, median_facts=median_facts)
    problem = found.problem if found is not None and not result.problem else None
    try:
        save_why(result.path, WhyRecord(answer.straggler, answer.median, verdict))  # reopened with the capture
    except ProfileError as exc:
        problem = f"the verdict was not kept with the capture: {exc}"
    return replace(answer, profiles=profiles, verdict=verdict, problem=problem)
