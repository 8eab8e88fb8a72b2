"""Why is this worker slow, asked of a running launch: the steps that ``ctl RUN why`` and the
window's *Role > Why is this worker slow?* share.

From the run's live status (the control socket's ``status`` role list), :func:`why_slow` picks the
straggler (the named worker, else the slowest) and the median worker, captures both at once
(:func:`core.profiling.capture.capture`), summarises them (:func:`core.profiling.summary.summarize`)
and applies the rules of :mod:`core.profiling.why`; the verdict is kept with the capture
(``why.json``, :mod:`core.profiling.why_record`). It blocks for the capture and the summary
(seconds): the window calls it off the GUI thread.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.profiling.capture import Capture, capture, select
from core.profiling.env import ProfileError
from core.profiling.summary import RoleProfile, summarize
from core.profiling.why import Verdict, explain, local_host_facts, role_facts, straggler_and_median
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
    verdict. Without a verdict, ``failures`` and ``problem`` say why."""

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
) -> WhyAnswer:
    """Profile the straggler (``name``, else the slowest worker of ``roles``) beside the median
    worker and explain the difference. Roles of ``agent_hosts`` (SSH hosts, Slurm nodes) are
    traced there by their agent through the launcher at ``control_socket``, their files brought
    into this run directory. Raises :class:`WhyRefused` when the workers cannot be chosen and
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
    )
    host_cpu = psutil.cpu_percent(None)
    answer = WhyAnswer(slow.role, median.role, result)
    xplanes = result.xplanes()
    if len(xplanes) < 2:
        return answer
    try:
        slow_profile, median_profile = summarize(xplanes)
    except ProfileError as exc:
        return WhyAnswer(answer.straggler, answer.median, result, problem=f"captured, but {exc}")
    # This machine's load and GPUs say nothing of a role its agent traced elsewhere (an SSH host, a
    # Slurm node, even one whose address is 127.0.0.1): no host or GPU figures for it.
    here = {t.role for t in targets if not t.by_agent}
    gpus = look_at_gpus([r for r in (slow, median) if r.role in here], run_path)  # temperature, clocks...
    for r in (slow, median):
        if r.role not in here and r.gpus:
            gpus[r.role] = ((), f"not looked at: {r.host} is reached through its agent")
    facts = [
        role_facts(
            r,
            local_host_facts(r.host, host_cpu) if r.role in here else None,
            gpus.get(r.role, ((), None)),
        )
        for r in (slow, median)
    ]
    verdict = explain(slow_profile, median_profile, facts[0], facts[1])
    try:
        save_why(result.path, WhyRecord(answer.straggler, answer.median, verdict))  # reopened with the capture
        problem = None
    except ProfileError as exc:
        problem = f"the verdict was not kept with the capture: {exc}"
    return WhyAnswer(answer.straggler, answer.median, result, (slow_profile, median_profile), verdict, problem)
