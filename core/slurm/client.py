"""Slurm's client commands as TowerDeck uses them, with typed results and errors a user can act on.

One allocation holds a run: ``sbatch`` of a holder script that only sleeps, so the job exists
until TowerDeck cancels it (or Slurm's time limit ends it), and each node's agent runs in it as a
step (``srun --jobid=J --nodes=1 --ntasks=1 --nodelist=NODE ...``). Nothing here parses text
meant for people where a format flag exists (``squeue -o``, ``scontrol -o``, ``sbatch
--parsable``).

Every argument is passed as argv, never through a local shell. With a login node, the command
runs there over ``ssh`` (the user's config, keys and known_hosts; batch mode, host-key checking
on) and every word is quoted with :func:`shlex.quote`. ``SLURM_CONF`` and the rest of the user's
Slurm environment (``SBATCH_*``, ``SLURM_*``) reach the commands untouched.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from core.cluster.slurm_table import SlurmConfig
from core.cluster.spec import ClusterSpec

# The job's only script: it holds the allocation while the roles run in their own steps. exec
# makes sleep the batch step itself, so a cancel has one process to end.
HOLDER_SCRIPT = (
    "#!/bin/sh\n# TowerDeck: holds this allocation; the roles run in their own steps.\nexec sleep infinity\n"
)
COMMAND_TIMEOUT_S = 30.0
# Job states in which the allocation is gone or going (squeue's %T / scontrol's JobState).
ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
_JOB_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class SlurmError(Exception):
    """A Slurm command failed: ``str()`` says which command, Slurm's own words and a fix."""

    def __init__(self, command: Sequence[str], message: str, fix: str, returncode: int | None = None) -> None:
        self.command = list(command)
        self.message = message
        self.fix = fix
        self.returncode = returncode
        super().__init__(f"{message}; fix: {fix}")


@dataclass(frozen=True)
class JobInfo:
    """A job as ``squeue`` lists it: state (PENDING, RUNNING, ...), why it waits, its nodes."""

    job_id: str
    state: str
    reason: str
    nodelist: str

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


@dataclass(frozen=True)
class JobEnd:
    """How a job ended, from ``scontrol show job`` (kept ``MinJobAge`` seconds after its end).

    ``state`` is Slurm's: COMPLETED, CANCELLED, TIMEOUT, FAILED, NODE_FAIL, ...; ``exit_code`` and
    ``signal`` are the batch script's (``ExitCode=0:15`` is code 0, signal 15).
    """

    job_id: str
    state: str
    reason: str
    exit_code: int | None
    signal: int | None

    def describe(self) -> str:
        """In words: "cancelled", "timed out (time limit reached)", ..."""
        words = {
            "CANCELLED": "cancelled",
            "TIMEOUT": "timed out: the allocation's time limit was reached",
            "FAILED": "failed",
            "NODE_FAIL": "ended: a node failed",
            "PREEMPTED": "was preempted",
            "OUT_OF_MEMORY": "ran out of memory",
            "DEADLINE": "passed its deadline",
            "BOOT_FAIL": "could not boot its nodes",
            "COMPLETED": "completed",
        }.get(self.state, self.state.lower())
        detail = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        return f"Slurm job {self.job_id} {words}{detail}"


def job_name_for(cluster_name: str) -> str:
    """The Slurm job name of a cluster's allocation: ``towerdeck-NAME``, safe for argv and shells."""
    return "towerdeck-" + (_JOB_NAME_UNSAFE.sub("_", cluster_name)[:60] or "cluster")


def sbatch_argv(config: SlurmConfig, job_name: str) -> list[str]:
    """``sbatch`` arguments that submit the holder script (read from stdin) for ``config``."""
    argv = ["sbatch", "--parsable", f"--job-name={job_name}", "--output=/dev/null", "--error=/dev/null"]
    if config.partition is not None:
        argv.append(f"--partition={config.partition}")
    if config.time is not None:
        argv.append(f"--time={config.time}")
    if config.nodes is not None:
        # One agent step per node, and nothing else on a node asks for a task slot.
        argv += [f"--nodes={config.nodes}", "--ntasks-per-node=1"]
    if config.account is not None:
        argv.append(f"--account={config.account}")
    # The user's own options last: sbatch takes the last of a repeated option, so theirs win.
    return [*argv, *config.extra_args]


def step_argv(
    job_id: str,
    node: str,
    command: Sequence[str],
    *,
    exact: bool = False,
    overlap: bool = True,
    name: str | None = None,
) -> list[str]:
    """``srun`` arguments that start ``command`` as one task on ``node`` inside job ``job_id``.

    The default suits a per-node agent: without ``--exact`` the step gets every CPU the job has
    on the node (under a cgroup task plugin its roles would otherwise share one CPU), and
    ``--overlap`` lets further steps on the node (a reattach, a check) start beside it instead of
    waiting for it to end. ``exact=True, overlap=False`` gives a step only what it asks for, so
    several such steps share an allocation. ``--unbuffered`` passes the task's stdout on as it is
    written: a JSON-lines protocol must not sit in srun's buffer. ``name`` is the step's name in
    squeue (``--job-name``), how :meth:`SlurmClient.named_steps` finds its id again.
    """
    argv = ["srun", *([f"--job-name={name}"] if name is not None else []), f"--jobid={job_id}"]
    argv += ["--nodes=1", "--ntasks=1", f"--nodelist={node}"]
    if exact:
        argv.append("--exact")
    if overlap:
        argv.append("--overlap")
    return [*argv, "--unbuffered", "--kill-on-bad-exit=1", "--quiet", "--", *command]


def parse_scontrol_record(line: str) -> dict[str, str]:
    """One ``scontrol -o show ...`` record as a dict. Values hold no spaces except the last
    fields scontrol prints (``Command=``, ``Comment=``), which this keeps whole up to the next key."""
    out: dict[str, str] = {}
    for match in re.finditer(r"(\w[\w:/]*)=(.*?)(?=\s+\w[\w:/]*=|$)", line.strip()):
        out[match.group(1)] = match.group(2)
    return out


class SlurmClient:
    """Runs Slurm's commands here, or on a login node over SSH.

    ``env`` adds to this process's environment (e.g. ``SLURM_CONF``) for local commands; a login
    node uses its own environment, as the user's shell there would.
    """

    def __init__(
        self,
        ssh_prefix: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> None:
        self._ssh_prefix = list(ssh_prefix) if ssh_prefix else None
        self._env = dict(env or {})
        self._timeout_s = timeout_s

    @property
    def env(self) -> dict[str, str]:
        """The environment local Slurm commands (and srun steps) run with."""
        return {**os.environ, **self._env}

    def argv(self, command: Sequence[str]) -> list[str]:
        """The argv that runs ``command``: itself here, or ``ssh ... -- login 'quoted command'``."""
        if self._ssh_prefix is None:
            return list(command)
        return [*self._ssh_prefix, shlex.join(command)]

    def run(self, command: Sequence[str], stdin_text: str | None = None, *, check: bool = True) -> str:
        """Run one Slurm command and return its stdout; :class:`SlurmError` when it fails."""
        argv = self.argv(command)
        conf = self.env.get("SLURM_CONF")
        if self._ssh_prefix is None and conf and not os.path.exists(conf):
            # Every Slurm command would retry a missing slurm.conf for 60 s before saying so.
            raise SlurmError(
                command,
                f"SLURM_CONF is {conf!r}, which does not exist",
                "point SLURM_CONF at your cluster's slurm.conf, or unset it to use /etc/slurm/slurm.conf",
            )
        try:
            done = subprocess.run(
                argv,
                input=stdin_text,
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self._timeout_s,
                check=False,
                stdin=None if stdin_text is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise SlurmError(
                command,
                f"{argv[0]!r} is not installed or not on PATH",
                "install Slurm's client commands (Debian: apt-get install slurm-client), "
                "or set [slurm] login to a login node that has them",
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmError(
                command,
                f"`{shlex.join(command)}` gave no answer in {self._timeout_s:.0f} s",
                "check that slurmctld is up (`scontrol ping`) and SLURM_CONF points at your cluster's slurm.conf",
            ) from None
        if check and done.returncode != 0:
            raise SlurmError(command, _explain(command, done.stderr), _fix_for(done.stderr), done.returncode)
        return done.stdout

    # -- the allocation ---------------------------------------------------------------------------

    def submit(self, config: SlurmConfig, job_name: str) -> str:
        """Submit the holder job for ``config``; returns its job id at once (it may be pending)."""
        out = self.run(sbatch_argv(config, job_name), stdin_text=HOLDER_SCRIPT).strip()
        job_id = out.split(";", 1)[0]
        if not job_id.isdigit():
            raise SlurmError(["sbatch"], f"sbatch printed {out!r}, not a job id", "check `sbatch --version` is Slurm's")
        return job_id

    def job(self, job_id: str) -> JobInfo | None:
        """The job as squeue shows it now; None once it has left squeue (ended)."""
        out = self.run(["squeue", "-h", f"--jobs={job_id}", "--states=all", "-o", "%i|%T|%r|%N"], check=False)
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[0] == job_id:
                return JobInfo(parts[0], parts[1], parts[2], parts[3])
        return None

    def wait_running(self, job_id: str, timeout_s: float, poll_s: float = 0.2) -> JobInfo:
        """Wait until the job runs; :class:`SlurmError` with the pending reason if it does not in
        time, or with how it ended if it ends first."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.job(job_id)
            if info is not None and info.running:
                return info
            if info is None or info.state in ENDED_STATES:
                end = self.job_end(job_id)
                said = end.describe() if end else f"Slurm job {job_id} has ended"
                raise SlurmError(["squeue"], f"{said} before it started", "see `scontrol show job` for why")
            if time.monotonic() > deadline:
                raise SlurmError(
                    ["squeue"],
                    f"Slurm job {job_id} is still pending after {timeout_s:.0f} s (reason: {info.reason})",
                    "check the partition's limits with `sinfo` and `scontrol show partition`, or ask for fewer resources",
                )
            time.sleep(poll_s)

    def hostnames(self, nodelist: str) -> list[str]:
        """A compressed node list (``gpu[01-03]``) as host names, by ``scontrol show hostnames``."""
        if not nodelist or nodelist in ("(null)", "None assigned"):
            return []
        return self.run(["scontrol", "show", "hostnames", nodelist]).split()

    def steps(self, job_id: str) -> list[str]:
        """The ids (``J.S``) of the job's running steps, the holder's batch step left out."""
        out = self.run(["squeue", "-h", "--steps", f"--jobs={job_id}", "-o", "%i"], check=False)
        return [s for s in out.split() if s.startswith(f"{job_id}.") and not s.endswith((".batch", ".extern"))]

    def named_steps(self, job_id: str) -> dict[str, str]:
        """The job's running steps by name: ``{step name: J.S}`` (srun gives a step's id only when
        verbose; its ``--job-name`` finds it again)."""
        out = self.run(["squeue", "-h", "--steps", f"--jobs={job_id}", "-o", "%i|%j"], check=False)
        found: dict[str, str] = {}
        for line in out.splitlines():
            step, _, name = line.strip().partition("|")
            if step:
                found.setdefault(name, step)
        return found

    def job_end(self, job_id: str) -> JobEnd | None:
        """How the job ended (``scontrol show job``); None while it has not ended, or once Slurm
        has forgotten it (``MinJobAge`` seconds after the end)."""
        out = self.run(["scontrol", "-o", "show", "job", job_id], check=False)
        record = parse_scontrol_record(out.splitlines()[0]) if out.strip() else {}
        state = record.get("JobState", "")
        if state not in ENDED_STATES:
            return None
        code, _, sig = record.get("ExitCode", "").partition(":")
        return JobEnd(
            job_id,
            state,
            record.get("Reason", ""),
            int(code) if code.isdigit() else None,
            int(sig) if sig.isdigit() else None,
        )

    def cancel(self, job_id: str, grace_s: float = 10.0, poll_s: float = 0.1) -> None:
        """End the allocation gracefully: SIGTERM to every step (the roles' handlers run), up to
        ``grace_s`` for them to end, then ``scancel`` of the whole job. Waits until squeue no
        longer lists it as pending or running."""
        info = self.job(job_id)
        # A pending job has no step to warn, and scancel --signal keeps retrying one until it starts.
        if info is not None and info.running:
            self.run(["scancel", "--signal=TERM", job_id], check=False)
            deadline = time.monotonic() + grace_s
            while self.steps(job_id) and time.monotonic() < deadline:
                time.sleep(poll_s)
        self.run(["scancel", job_id], check=False)
        deadline = time.monotonic() + max(grace_s, 10.0)
        while (info := self.job(job_id)) is not None and info.state not in ENDED_STATES:
            if time.monotonic() > deadline:
                raise SlurmError(
                    ["scancel", job_id],
                    f"Slurm job {job_id} is still {info.state} after scancel",
                    f"run `scancel {job_id}` again, or ask an administrator (the node may be unresponsive)",
                )
            time.sleep(poll_s)

    def cancel_step(self, step_id: str, *, graceful: bool = True) -> None:
        """Cancel one step: SIGTERM (its handler runs) when ``graceful``, else SIGKILL."""
        self.run(["scancel", "--signal=TERM", step_id] if graceful else ["scancel", step_id], check=False)


@dataclass(frozen=True)
class SlurmCheck:
    """One pre-flight check of Slurm: ``ok`` True or False, what was seen, and a fix when not ok."""

    name: str
    _: KW_ONLY
    ok: bool
    detail: str
    fix: str = ""


def check_slurm(client: SlurmClient, config: SlurmConfig) -> list[SlurmCheck]:
    """What must hold before a launch on Slurm: the client commands are there, the controller
    answers, and the partition exists and is up. Never raises; each failure says how to fix it."""
    checks: list[SlurmCheck] = []
    for command in ("sbatch", "srun", "squeue"):
        try:
            version = client.run([command, "--version"]).strip()
            checks.append(SlurmCheck(command, ok=True, detail=version))
        except SlurmError as exc:
            checks.append(SlurmCheck(command, ok=False, detail=exc.message, fix=exc.fix))
    if not all(c.ok for c in checks):
        return checks
    try:
        rows = client.run(["sinfo", "-h", "-o", "%P|%a"]).split()
    except SlurmError as exc:
        return [*checks, SlurmCheck("controller", ok=False, detail=exc.message, fix=exc.fix)]
    checks.append(SlurmCheck("controller", ok=True, detail=f"{len(rows)} partitions"))
    states = {row.split("|")[0]: row.split("|")[-1] for row in rows}
    wanted = config.partition or next((p.rstrip("*") for p in states if p.endswith("*")), None)
    state = states.get(wanted or "") or states.get(f"{wanted}*")
    if wanted is None:
        checks.append(
            SlurmCheck("partition", ok=False, detail="no default partition", fix="set [slurm] partition (`sinfo -s`)")
        )
    elif state is None:
        names = ", ".join(p.rstrip("*") for p in states) or "none"
        checks.append(
            SlurmCheck(
                "partition",
                ok=False,
                detail=f"no partition {wanted!r} (there are: {names})",
                fix="set [slurm] partition to one of them",
            )
        )
    elif state != "up":
        checks.append(
            SlurmCheck(
                "partition",
                ok=False,
                detail=f"partition {wanted!r} is {state}",
                fix="wait for it, or choose another partition",
            )
        )
    else:
        checks.append(SlurmCheck("partition", ok=True, detail=f"{wanted} is up"))
    return checks


def _explain(command: Sequence[str], stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    said = lines[-1] if lines else "no message"
    return f"`{command[0]}` failed: {said}"


def _fix_for(stderr: str) -> str:
    text = stderr.lower()
    if "invalid partition" in text:
        return "set [slurm] partition to one that `sinfo -s` lists"
    if "invalid account" in text:
        return "set [slurm] account to one of yours (`sacctmgr show assoc user=$USER`), or remove it"
    if "configuration file" in text:
        return "set SLURM_CONF to your cluster's slurm.conf (or run on a machine where /etc/slurm/slurm.conf is)"
    if "unable to contact slurm controller" in text or "connection refused" in text:
        return "check SLURM_CONF points at your cluster's slurm.conf and slurmctld is up (`scontrol ping`)"
    if "munge" in text:
        return "munged must run on this machine with the cluster's key (`munge -n | unmunge`)"
    if "time limit" in text:
        return "ask for less [slurm] time, within the partition's MaxTime (`scontrol show partition`)"
    if "node count" in text or "requested node configuration is not available" in text:
        return "ask for fewer [slurm] nodes or resources in extra_args than the partition has (`sinfo`)"
    return "run the same command in a terminal to see more; check [slurm] extra_args"


def ssh_prefix_for(login: str, ssh_config: Path | None) -> list[str]:
    """The ``ssh ... -- HOST`` words that reach a ``[slurm] login`` node (remote command after)."""
    from core.cluster.spec import HostConfig
    from core.remote.ssh import ssh_argv

    return ssh_argv(HostConfig(login, ssh=login), ssh_config)


def slurm_client(spec: ClusterSpec) -> SlurmClient:
    """The client for the spec's ``[slurm]``: here, or on its login node over SSH."""
    assert spec.slurm is not None
    if spec.slurm.login is None:
        return SlurmClient()
    from core.remote.ssh import ssh_config_path

    return SlurmClient(ssh_prefix_for(spec.slurm.login, ssh_config_path(spec)))
