"""Addresses in a cluster file: ``host:port`` of a task, SSH destinations, program names.

Every name here can reach ssh's command line or a remote shell, so the patterns refuse what a
shell or ssh would read as something else: a leading ``-`` (an option, e.g.
``-oProxyCommand=...``), shell metacharacters, whitespace.
"""

from __future__ import annotations

import re

HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_IP_LITERAL = re.compile(r"[0-9A-Fa-f:.]+")
_SSH_DESTINATION = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9_][A-Za-z0-9_.-]*)@)?(?P<host>[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{1,5}))?$"
)
PROGRAM = re.compile(r"^[A-Za-z0-9_./~+][A-Za-z0-9_./~+-]*$")
_ADDRESS = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>[^:]+)$")


def is_host_name(text: str) -> bool:
    """A machine name or an IP address (v4 or v6) that is safe to hand to ssh."""
    return bool(HOST_NAME.match(text)) or bool(_IP_LITERAL.fullmatch(text))


def parse_ssh_destination(text: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` -> (user, host, port); raises ValueError naming what is wrong."""
    m = _SSH_DESTINATION.match(text)
    if not m:
        raise ValueError(
            f"{text!r} is not an SSH destination (user@host, host:port or an ssh config alias; "
            "letters, digits, '.', '_' and '-', not starting with '-')"
        )
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"port {port} in {text!r} is out of range 1-65535")
    return m.group("user"), m.group("host").strip("[]"), port


def parse_address(text: str) -> tuple[str, int]:
    """Split ``host:port``; raises ValueError with a message a user can act on.

    Whitespace anywhere is refused, before or after the port alike ("80 " as " 80"): the address
    is what TensorFlow, ssh and the user's own scripts are given, and none of them reads it."""
    if any(c.isspace() for c in text):
        raise ValueError(f"{text!r} has whitespace in it; an address is host:port with no spaces")
    m = _ADDRESS.match(text)
    if not m:
        raise ValueError(f"{text!r} is not host:port")
    host = m.group("v6") or m.group("host")
    port_text = m.group("port")
    if not port_text.isdigit():
        raise ValueError(f"port {port_text!r} in {text!r} is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} in {text!r} is out of range 1-65535")
    return host, port


def canonical_host(host: str) -> str:
    """The form two spellings of one host share, to find a port or GPU given twice."""
    host = host.lower()
    return "127.0.0.1" if host in ("localhost", "localhost.localdomain") else host
