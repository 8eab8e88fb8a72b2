"""TowerDeck in the desktop's application menu: a freedesktop.org desktop entry and its icon, in
the user's ``$XDG_DATA_HOME`` (``~/.local/share`` when unset), as ``towerdeck install-desktop``
(``make desktop`` from a checkout) writes them; ``uninstall-desktop`` removes exactly those files.

The entry's ``Exec`` line follows the Desktop Entry Specification's quoting (an argument with a
space or a shell character in double quotes, ``"`" "$" "\\"`` and the backquote escaped, ``%``
doubled, then the string's own backslash escape), so an install under ``/home/Ann Lee/`` or a path
with ``$`` starts the same program that wrote it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from core.atomic import replace_file
from core.install.about import HOME, is_checkout

APP_ID = "towerdeck"  # the entry's file name and the icon's name; the window's desktopFileName
ICON_SOURCE = HOME / "resources" / "icons" / "towerdeck.svg"
# Characters that make an Exec argument need quoting (Desktop Entry Specification, "The Exec key").
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_ESCAPED_IN_QUOTES = set('"`$\\')


class DesktopError(Exception):
    """A one-line reason the entry cannot be written; shown as it is."""


@dataclass(frozen=True)
class DesktopFiles:
    """Where the entry and its icon go under one XDG data folder."""

    data_home: Path

    @property
    def entry(self) -> Path:
        return self.data_home / "applications" / f"{APP_ID}.desktop"

    @property
    def icon(self) -> Path:
        return self.data_home / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"

    def all(self) -> tuple[Path, Path]:
        return (self.entry, self.icon)


def data_home(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, or ``~/.local/share`` when it is unset, empty or relative (the XDG Base
    Directory Specification says a relative path is to be ignored)."""
    value = (os.environ if environ is None else environ).get("XDG_DATA_HOME", "")
    return Path(value) if value and os.path.isabs(value) else Path.home() / ".local" / "share"


def launcher_argv() -> list[str]:
    """The command the menu runs: the ``towerdeck`` script beside this python when TowerDeck is
    installed (pipx, a wheel), else this python with the checkout's main.py."""
    script = Path(sys.executable).parent / "towerdeck"
    if not is_checkout() and script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [os.path.abspath(sys.executable), str(HOME / "main.py")]


def exec_argument(arg: str) -> str:
    """One argument of an ``Exec`` value, quoted as the specification asks (before the string
    value's own escaping, which :func:`exec_value` adds)."""
    if any(ord(c) < 0x20 or c == "\x7f" for c in arg):
        raise DesktopError(f"cannot name {arg!r} in a desktop entry: it holds a control character; move TowerDeck")
    text = arg.replace("%", "%%")
    if not (_RESERVED & set(text)) and text:
        return text
    return '"' + "".join("\\" + c if c in _ESCAPED_IN_QUOTES else c for c in text) + '"'


def exec_value(argv: list[str]) -> str:
    """The ``Exec`` value: the quoted arguments, then ``%f`` (a cluster file opened with it)."""
    quoted = " ".join(exec_argument(a) for a in argv) + " %f"
    return quoted.replace("\\", "\\\\")  # a string value's escape: a backslash is written twice


def string_value(text: str) -> str:
    """A plain string value (``TryExec``): backslash escaped, no control characters."""
    if any(ord(c) < 0x20 for c in text):
        raise DesktopError(f"cannot name {text!r} in a desktop entry: it holds a control character; move TowerDeck")
    return text.replace("\\", "\\\\")


def entry_text(argv: list[str]) -> str:
    """The desktop entry for a window started by ``argv``."""
    return "\n".join(
        [
            "[Desktop Entry]",
            "Type=Application",
            "Version=1.4",
            "Name=TowerDeck",
            "GenericName=Distributed TensorFlow launcher",
            "Comment=Launch and watch distributed TensorFlow clusters",
            # The menu hides the entry once the program is gone (pipx uninstall, a deleted checkout).
            f"TryExec={string_value(argv[0])}",
            f"Exec={exec_value(argv)}",
            f"Icon={APP_ID}",
            "Terminal=false",
            "Categories=Development;",
            "Keywords=TensorFlow;distributed;training;GPU;cluster;parameter server;",
            "StartupNotify=true",
            "StartupWMClass=TowerDeck",
            "",
        ]
    )


def _write(path: Path, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all: a menu never reads a half-written entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, data, mode=0o644)


def install(files: DesktopFiles, argv: list[str] | None = None) -> list[Path]:
    """Write the entry and the icon; returns the files written. Raises :class:`DesktopError` with
    the reason in one line."""
    text = entry_text(argv or launcher_argv())
    try:
        icon = ICON_SOURCE.read_bytes()
    except OSError as exc:
        raise DesktopError(f"cannot read the icon {ICON_SOURCE}: {exc.strerror or exc}; reinstall TowerDeck") from exc
    for path, data in ((files.icon, icon), (files.entry, text.encode())):
        try:
            _write(path, data)
        except OSError as exc:
            raise DesktopError(
                f"cannot write {path}: {exc.strerror or exc}; set XDG_DATA_HOME to a folder you can write"
            ) from exc
    return [files.entry, files.icon]


def uninstall(files: DesktopFiles) -> list[Path]:
    """Remove the entry and the icon that :func:`install` writes; returns those that were there."""
    removed = []
    for path in files.all():
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise DesktopError(f"cannot remove {path}: {exc.strerror or exc}") from exc
        removed.append(path)
    return removed
