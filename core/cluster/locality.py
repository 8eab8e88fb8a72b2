"""Is this address this machine? Decided once per process, then cached.

A task whose host is this machine starts here; any other host is reached over SSH. Asking the
operating system for its interfaces (``psutil.net_if_addrs``) costs a system call per interface;
a cluster of 64 workers asked it once per task, every launch and every pre-flight. The answer
only changes when an interface comes or goes, so it is read once; :func:`forget` drops it (a test
that adds an address, or a long-lived window after the network changed).

Standard library only (psutil when present): the model (:mod:`core.cluster.spec`) imports this module,
and it imports nothing of TowerDeck's.
"""

from __future__ import annotations

import functools
import ipaddress
import socket


@functools.cache
def local_addresses() -> frozenset[str]:
    """Names and addresses under which this machine's tasks are launched here (lower case)."""
    names = {"localhost", "localhost.localdomain", "::1", socket.gethostname().lower()}
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family in (socket.AF_INET, socket.AF_INET6):
                    names.add(a.address.split("%")[0].lower())
    except Exception:  # noqa: S110 - psutil missing or refusing: loopback and hostname still count
        pass
    return frozenset(names)


def is_local_host(host: str, local: set[str] | frozenset[str] | None = None) -> bool:
    """True when ``host`` (a name or address) is this machine: loopback, or one of ``local``
    (default: :func:`local_addresses`)."""
    host = host.lower()
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    return host in (local if local is not None else local_addresses())


def forget() -> None:
    """Read the interfaces again on the next question."""
    local_addresses.cache_clear()
