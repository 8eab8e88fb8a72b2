"""The OpenSSH client as TowerDeck uses it: command lines, the agent bootstrap, failure messages.

TowerDeck runs the system ``ssh`` so that the user's config, keys, agent, ProxyJump and
known_hosts apply, always in batch mode (never a password prompt) with host-key checking on (an
unknown or changed key is an error the user sees). Nothing listens on a network port: the agent
(its zipapp, :func:`core.agent.artifact`) is sent over the connection's stdin and speaks JSON
lines on the same stdio.

Every value that reaches the remote shell goes through :func:`shlex.quote` (``shlex.join``);
host names, users and ports are validated by ``core.cluster.spec`` before they get here, and ``--``
ends ssh's options, so a host can never be read as an option.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from core.agent import ARTIFACT_NAME, GPUS_MEMBER, PROBE_MEMBER, artifact
from core.cluster.spec import ClusterSpec, HostConfig, parse_ssh_destination

CONNECT_TIMEOUT_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3  # the connection counts as dropped after 15 s without an answer
LENGTH_HEADER_BYTES = 16

# Remote python: ``rd(n)`` reads exactly n bytes of stdin (the length header, then the zipapp).
_READ_STDIN = (
    "def rd(n):\n"
    " b=b''\n"
    " while len(b)<n:\n"
    "  c=os.read(0,n-len(b))\n"
    "  if not c:sys.exit('towerdeck: the agent was cut short')\n"
    "  b+=c\n"
    " return b\n"
)

# Runs on the remote host with its python: reads the agent's zipapp (length header, then the
# bytes) from stdin, writes it into the run directory (0700), and replaces itself with it, which
# then speaks the protocol on the same stdin/stdout. Nothing is installed; argv[1] is the run dir.
BOOTSTRAP = (
    "import os,sys\n"
    "d=os.path.expanduser(sys.argv[1]);os.makedirs(d,0o700,exist_ok=True);os.chmod(d,0o700);os.chdir(d)\n"
    + _READ_STDIN
    + f"n=int(rd({LENGTH_HEADER_BYTES}))\n"
    f"f=os.open('{ARTIFACT_NAME}',os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600);os.write(f,rd(n));os.close(f)\n"
    f"os.execv(sys.executable,[sys.executable,'-u','{ARTIFACT_NAME}']+sys.argv[2:])\n"
)

# Reattaches to an agent already serving in the run directory argv[1].
ATTACH = (
    "import os,sys\n"
    "d=os.path.expanduser(sys.argv[1])\n"
    "try:os.chdir(d)\n"
    'except OSError as e:print(\'{"ev":"attach_failed","message":"no run directory %s: %s"}\'%(d,e.strerror),flush=True);sys.exit(3)\n'
    f"os.execv(sys.executable,[sys.executable,'-u','{ARTIFACT_NAME}','--attach','agent.sock'])\n"
)


def member_bootstrap(member: str) -> str:
    """Runs one self-contained module of the agent (its ``main(argv)``) on a remote host where no
    agent may have been sent yet: reads the zipapp (length header, then the bytes) from stdin and
    runs ``member`` from memory, so nothing is written there. Its arguments follow on the command
    line; it prints its answer on stdout."""
    return (
        "import io,os,sys,zipfile\n"
        + _READ_STDIN
        + f"z=zipfile.ZipFile(io.BytesIO(rd(int(rd({LENGTH_HEADER_BYTES})))))\n"
        "g={'__name__':'towerdeck_member'}\n"
        f"exec(compile(z.read('{member}'),'{ARTIFACT_NAME}/{member}','exec'),g)\n"
        "sys.exit(g['main'](sys.argv[1:]))\n"
    )


# The pre-flight probe (argv[1] is the JSON request; it prints one JSON answer).
PROBE_BOOTSTRAP = member_bootstrap(PROBE_MEMBER)
# This host's GPUs as JSON lines (``python main.py gpus``; arguments: core/agent/gpuquery.py).
GPUS_BOOTSTRAP = member_bootstrap(GPUS_MEMBER)


def ssh_config_path(spec: ClusterSpec | None = None) -> Path | None:
    """The ssh client config to use: the cluster's ``ssh_config``, else $TOWERDECK_SSH_CONFIG,
    else None (ssh reads ~/.ssh/config as usual)."""
    if spec is not None and spec.ssh_config is not None:
        return spec.ssh_config
    env = os.environ.get("TOWERDECK_SSH_CONFIG")
    return Path(env).expanduser() if env else None


def ssh_argv(host: HostConfig, config: Path | None, connect_timeout_s: int = CONNECT_TIMEOUT_S) -> list[str]:
    """``ssh`` options and destination for ``host`` (the remote command goes after these)."""
    if host.ssh is None:
        raise ValueError(f"{host.address} is this machine; it is not reached over SSH")
    user, hostname, port = parse_ssh_destination(host.ssh)
    argv = ["ssh"]
    if config is not None:
        argv += ["-F", str(config)]
    argv += [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"ConnectTimeout={int(connect_timeout_s)}",
        "-o",
        f"ServerAliveInterval={KEEPALIVE_INTERVAL_S}",
        "-o",
        f"ServerAliveCountMax={KEEPALIVE_COUNT}",
        "-T",
    ]
    if port is not None:
        argv += ["-p", str(port)]
    if user is not None:
        argv += ["-l", user]
    return [*argv, "--", hostname]


def remote_python(host: HostConfig, code: str, *args: str) -> str:
    """The remote shell command running ``python -c code args...``, every word quoted."""
    return shlex.join([host.python, "-c", code, *args])


def agent_payload() -> bytes:
    """What the bootstraps read from stdin: a fixed-width length, then the agent's zipapp."""
    data = artifact()
    return f"{len(data):0{LENGTH_HEADER_BYTES - 1}d}\n".encode() + data


@dataclass(frozen=True)
class SshFailure:
    """Why ssh failed, in words a user can act on."""

    cause: str
    fix: str

    def __str__(self) -> str:
        return f"{self.cause}; {self.fix}"


def explain_failure(host: HostConfig, stderr: str, returncode: int | None) -> SshFailure:
    """Turn ssh's stderr into a cause naming the host, and a fix."""
    dest = host.ssh or host.address
    text = stderr.strip()
    last = text.splitlines()[-1] if text else f"ssh exited with code {returncode}"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return SshFailure(
            f"the host key of {dest} has CHANGED since it was recorded in known_hosts",
            "if the machine was reinstalled, remove the old key with `ssh-keygen -R HOST` and connect once "
            "with `ssh` to check and accept the new one; otherwise do not connect",
        )
    if "Host key verification failed" in text or "No ED25519 host key is known" in text or "host key" in text.lower():
        return SshFailure(
            f"the host key of {dest} is not in known_hosts (or does not match)",
            f"connect once with `ssh {dest}` and check and accept its key, or add it with ssh-keyscan",
        )
    if "Permission denied" in text:
        return SshFailure(
            f"{dest} refused the login ({last})",
            "load your key in ssh-agent (`ssh-add`) or set IdentityFile for this host in your ssh config; "
            "TowerDeck never asks for a password",
        )
    if re.search(r"Could not resolve hostname|Name or service not known", text):
        return SshFailure(f"cannot resolve {dest}", "check the host name, or add a Host alias in your ssh config")
    if re.search(r"Connection refused|Connection timed out|No route to host|Network is unreachable", text):
        return SshFailure(f"cannot reach {dest}: {last}", "check that the machine is up and sshd runs on that port")
    if re.search(r"command not found|No such file or directory", text) and "python" in text:
        return SshFailure(
            f"{host.python!r} was not found on {dest}", f'set python for [hosts."{host.address}"] to its full path'
        )
    return SshFailure(f"ssh to {dest} failed: {last}", f"try `ssh {dest}` in a terminal to see why")
