"""`install-desktop` puts TowerDeck in the application menu (a freedesktop.org desktop entry and its
icon under $XDG_DATA_HOME) and `uninstall-desktop` takes exactly that out again."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.install.desktop import DesktopError, DesktopFiles, data_home, entry_text, exec_argument
from tests.helpers.project import ROOT, run_cli


def _entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(path.read_text())
    return dict(parser["Desktop Entry"])


def _exec_argv(value: str) -> list[str]:
    """The argv a launcher reads from an Exec value, per the Desktop Entry Specification: the
    string's escapes first (``\\\\`` is one backslash), then the quoting (inside double quotes a
    backslash escapes ``"``, the backquote, ``$`` and itself), then %% as %; %f is a field code."""
    text, i = "", 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            text += {"s": " ", "n": "\n", "t": "\t", "r": "\r"}.get(value[i + 1], value[i + 1])
            i += 2
        else:
            text += value[i]
            i += 1
    args: list[str] = []
    current: str | None = None
    quoted, i = False, 0
    while i < len(text):
        c = text[i]
        if quoted and c == "\\" and i + 1 < len(text) and text[i + 1] in '"`$\\':
            current = (current or "") + text[i + 1]
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            current = current or ""
        elif c == " " and not quoted:
            if current is not None:
                args.append(current)
            current = None
        else:
            current = (current or "") + c
        i += 1
    assert not quoted, f"unterminated quote in {value!r}"
    if current is not None:
        args.append(current)
    return [a.replace("%%", "%") for a in args if a != "%f"]


def _validate(path: Path) -> None:
    tool = shutil.which("desktop-file-validate")
    if tool is not None:  # Debian's desktop-file-utils (scripts/sysdeps.sh installs it)
        checked = subprocess.run([tool, str(path)], capture_output=True, text=True)
        assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout + checked.stderr


def test_install_desktop_writes_a_valid_entry_and_icon_and_uninstall_removes_them(tmp_path: Path):
    home = tmp_path / "xdg data"
    done = run_cli("install-desktop", env={"XDG_DATA_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    entry_path = home / "applications" / "towerdeck.desktop"
    icon = home / "icons" / "hicolor" / "scalable" / "apps" / "towerdeck.svg"
    assert f"wrote {entry_path}" in done.stdout and f"wrote {icon}" in done.stdout
    _validate(entry_path)
    entry = _entry(entry_path)
    assert entry["Type"] == "Application" and entry["Name"] == "TowerDeck"
    assert entry["Icon"] == "towerdeck" and entry["Terminal"] == "false"
    assert "Development;" in entry["Categories"]
    argv = _exec_argv(entry["Exec"])
    assert argv[-1] == str(ROOT / "main.py")  # from a checkout: its python runs its main.py
    assert Path(argv[0]).is_file() and entry["TryExec"] == argv[0]
    assert icon.read_bytes() == (ROOT / "resources" / "icons" / "towerdeck.svg").read_bytes()
    # Started as the menu starts it, it is TowerDeck.
    version = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=120)
    assert version.stdout.startswith("towerdeck "), version.stdout + version.stderr

    other = home / "applications" / "someone-else.desktop"
    other.write_text("[Desktop Entry]\nType=Application\nName=Other\nExec=other\n")
    gone = run_cli("uninstall-desktop", env={"XDG_DATA_HOME": str(home)})
    assert gone.returncode == 0, gone.stderr
    assert not entry_path.exists() and not icon.exists()
    assert other.exists()  # only TowerDeck's own files
    again = run_cli("uninstall-desktop", env={"XDG_DATA_HOME": str(home)})
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_an_unwritable_data_home_ends_in_one_line(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = run_cli("install-desktop", "--data-home", str(blocker))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("install-desktop: cannot write ") and "XDG_DATA_HOME" in done.stderr


def test_data_home_follows_the_xdg_rules(tmp_path: Path):
    assert data_home({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path
    for unusable in ("", "relative/share"):  # the XDG spec: ignore an empty or relative value
        assert data_home({"XDG_DATA_HOME": unusable}) == Path.home() / ".local" / "share"
    assert data_home({}) == Path.home() / ".local" / "share"


def test_a_path_with_a_control_character_is_refused_in_one_line():
    with pytest.raises(DesktopError, match="control character"):
        exec_argument("/opt/tower\ndeck/bin/towerdeck")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(min_codepoint=0x20, exclude_characters="\x7f"), min_size=1), min_size=1))
def test_exec_quoting_gives_back_the_same_argv(argv: list[str]):
    """Any path (spaces, quotes, $, backslashes, %) reads back as the same argument."""
    entry = entry_text(argv)
    (line,) = [x for x in entry.split("\n") if x.startswith("Exec=")]  # lines end at \n only (not U+0085)
    assert _exec_argv(line.removeprefix("Exec=")) == argv


def test_desktop_files_live_where_menus_look(tmp_path: Path):
    files = DesktopFiles(tmp_path)
    assert files.entry == tmp_path / "applications" / "towerdeck.desktop"
    assert files.icon == tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "towerdeck.svg"
