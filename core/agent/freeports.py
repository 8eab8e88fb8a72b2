"""``agent.pyz --free-ports N``: choose N distinct free TCP ports on this machine, print them.

Counted tasks on Slurm (``tasks = 2``: a count instead of addresses) get their ports here, on the node that will
run them, as a one-shot step before the agent proper starts: the controller cannot know which
ports are free on a node it has never seen. Every socket binds ``0.0.0.0`` port 0 (the kernel
picks a free port, on every address, as a TensorFlow server binds) and all N stay bound until
all N are chosen, so they are distinct; then all are closed and the answer is printed as one
JSON line: ``{"ports": [P1, ...]}``, or ``{"error": "..."}`` with exit code 2.

Standard library only, and no import from the rest of the agent package.
"""

from __future__ import annotations

import json
import socket
import sys

# Far more than one node's tasks; a bound on what one request can hold open at once.
MAX_PORTS = 1024
# Every address, as a TensorFlow server binds: a port free only on 127.0.0.1 would not do. The
# sockets are bound, never listened on, and closed before the answer is printed.
ALL_ADDRESSES = "0.0.0.0"  # noqa: S104


def free_ports(count: int, host: str = ALL_ADDRESSES) -> list[int]:
    """``count`` distinct TCP ports free on ``host`` right now (bound together, then released)."""
    if not 1 <= count <= MAX_PORTS:
        raise ValueError(f"the number of ports must be from 1 to {MAX_PORTS}, not {count}")
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            # No SO_REUSEADDR: a port another socket still holds (even in TIME_WAIT) is not chosen.
            s.bind((host, 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def main(argv: list[str]) -> int:
    """``--free-ports N``: print the JSON answer; exit 0, or 2 with ``error`` when it cannot."""
    text = argv[0] if argv else ""
    answer: dict[str, object]
    if not text.strip().isdigit():
        answer, code = {"error": f"--free-ports takes a whole number of ports, not {text!r}"}, 2
    else:
        try:
            answer, code = {"ports": free_ports(int(text))}, 0
        except (ValueError, OSError) as exc:
            answer, code = {"error": f"cannot choose free ports: {exc}"}, 2
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    if code:  # also on stderr: through srun a failed step's stderr is what the caller reports
        sys.stderr.write(f"{answer['error']}\n")
    return code
