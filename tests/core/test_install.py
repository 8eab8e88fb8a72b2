"""TowerDeck installed as a user installs it: the wheel `make dist` builds, put into a fresh
virtual environment outside the checkout, gives a `towerdeck` command for the window and every
subcommand, with its own code under one `towerdeck/` folder (no top-level `core` or `gui` in
site-packages, where another distribution's would clash).

No network: the wheel is built with the checkout's setuptools (no build isolation), installed with
--no-deps --no-index, and the fresh environment reaches this venv's third-party packages through a
.pth file (TowerDeck itself is not installed there: it runs from the checkout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.helpers.project import ROOT

# Building, installing and starting the command took 43 s at load 3 and 67 s at load 10-16 on 2 cores.
pytestmark = pytest.mark.slow

SHIPPED = ("core", "gui", "resources", "main.py", "setup.py", "pyproject.toml", "README.md")


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=180, env=env)


def _clean_env(**extra: str) -> dict[str, str]:
    """The user's environment, without anything that would make the checkout importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; returns its bin/ folder."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"  # a copy: setuptools leaves build/ and *.egg-info in the tree it builds
    source.mkdir()
    for name in SHIPPED:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            "dist",
            ".",
        ],
        cwd=source,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (source / "dist").glob("towerdeck-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
    (Path(purelib.stdout.strip()) / "deps-from-checkout-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    added = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        cwd=tmp,
    )
    assert added.returncode == 0, added.stderr
    return venv / "bin"


@pytest.mark.timeout(240)
def test_the_wheel_puts_everything_under_one_towerdeck_folder(installed: Path):
    (wheel,) = installed.parent.parent.glob("source/dist/towerdeck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"towerdeck", wheel.name.split("-py3")[0] + ".dist-info"}
    for shipped in (
        "towerdeck/main.py",
        "towerdeck/core/cli/main.py",
        "towerdeck/gui/window/app.py",
        "towerdeck/resources/demo_cluster.toml",
        "towerdeck/resources/trainers/between_graph.py",
        "towerdeck/resources/trainers/light_trainer.py",
        "towerdeck/resources/icons/towerdeck.svg",
    ):
        assert shipped in names
    assert "towerdeck/setup.py" not in names
    # The installed environment has no top-level `core` or `gui` for another package to clash with.
    probe = _run(
        [str(installed / "python"), "-c", "import importlib.util as u; print(u.find_spec('core'), u.find_spec('gui'))"],
        cwd=installed,
        env=_clean_env(),
    )
    assert probe.stdout.split() == ["None", "None"], probe.stdout + probe.stderr


@pytest.mark.timeout(240)
def test_the_towerdeck_command_runs_every_subcommand_from_outside_the_checkout(installed: Path, tmp_path: Path):
    towerdeck = str(installed / "towerdeck")
    env = _clean_env(PATH=str(installed) + os.pathsep + os.environ.get("PATH", ""))
    helped = _run([towerdeck, "--help"], cwd=tmp_path, env=env)
    assert helped.returncode == 0, helped.stderr
    for subcommand in ("validate", "launch", "runs", "ctl", "demo-path", "install-desktop"):
        assert subcommand in helped.stdout
    # Its help speaks of the command the user has, not of a checkout's main.py.
    assert "towerdeck launch cluster.toml" in helped.stdout and "python main.py" not in helped.stdout
    gpus_help = _run([towerdeck, "gpus", "--help"], cwd=tmp_path, env=env)
    assert "towerdeck gpus cluster.toml --watch" in gpus_help.stdout, gpus_help.stdout
    version = _run([towerdeck, "--version"], cwd=tmp_path, env=env)
    assert version.stdout.strip() == "towerdeck 0.1.0", version.stdout + version.stderr
    demo = _run([towerdeck, "demo-path"], cwd=tmp_path, env=env)
    assert demo.returncode == 0, demo.stderr
    demo_path = Path(demo.stdout.strip())
    assert demo_path.is_file() and installed.parent in demo_path.parents  # the installed copy, not ROOT's
    valid = _run([towerdeck, "validate", "--no-ports", str(demo_path)], cwd=tmp_path, env=env)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "OK - demo" in valid.stdout
    # The window: the demo opens and a screenshot is saved (offscreen), from the same command.
    shot = tmp_path / "window.png"
    window = _run(
        [towerdeck, "--demo", "--screenshot", str(shot), "--after", "0.5"],
        cwd=tmp_path,
        env={**env, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert window.returncode == 0, window.stderr
    assert shot.stat().st_size > 10_000
    # The menu entry made by the installed command starts the installed command.
    data_home = tmp_path / "xdg"
    made = _run([towerdeck, "install-desktop"], cwd=tmp_path, env={**env, "XDG_DATA_HOME": str(data_home)})
    assert made.returncode == 0, made.stderr
    entry = (data_home / "applications" / "towerdeck.desktop").read_text()
    assert f"Exec={towerdeck} %f" in entry.splitlines()
