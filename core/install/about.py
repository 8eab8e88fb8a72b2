"""What TowerDeck is and runs with, for Help > About and ``--version``.

Versions are read from the installed distributions' metadata (``importlib.metadata``), never by
importing the package: TensorFlow takes seconds to import and the window's process never loads it.
NVML is asked through the agent's own layer (``core.agent.gpuquery``), which makes calls into the
driver: :func:`nvml_summary` belongs off the GUI thread.
"""

from __future__ import annotations

import contextlib
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# The folder holding core/: a checkout, or towerdeck/ in site-packages (setup.py).
HOME = Path(__file__).resolve().parents[2]
DISTRIBUTION = "towerdeck"
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-macos")


def is_checkout(home: Path = HOME) -> bool:
    """Whether TowerDeck runs from its source tree (``python main.py``) rather than installed."""
    return (home / "pyproject.toml").is_file()


def towerdeck_version(home: Path = HOME) -> str:
    """The checkout's pyproject.toml version, else the installed distribution's, else ``unknown``.

    The checkout comes first: a TowerDeck installed into the same environment may be another one."""
    if is_checkout(home):
        try:
            with open(home / "pyproject.toml", "rb") as f:
                return str(tomllib.load(f)["project"]["version"])
        except (OSError, tomllib.TOMLDecodeError, KeyError):
            pass
    return distribution_version(DISTRIBUTION) or "unknown"


def distribution_version(*names: str) -> str | None:
    """The version of the first of ``names`` installed in this python's environment, or None."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def tensorflow_summary() -> str:
    """TensorFlow as a role on this machine would find it: ``{python}`` is TowerDeck's python."""
    for name in TENSORFLOW_DISTRIBUTIONS:
        version = distribution_version(name)
        if version is not None:
            return version if name == "tensorflow" else f"{version} ({name})"
    return f"not installed for {sys.executable}"


def nvml_summary() -> str:
    """NVML's driver and GPU count, or ``not found`` with the reason. Calls the driver: not on the
    GUI thread."""
    from core.agent.gpuquery import GpuQuery

    query = GpuQuery()
    bindings = distribution_version("nvidia-ml-py")
    if query.nvml is None:
        return f"not found ({query.status})"
    parts = [f"driver {query.driver}" if query.driver else "driver version not reported"]
    parts.append(f"{len(query.handles)} GPU{'' if len(query.handles) == 1 else 's'}")
    if bindings:
        parts.append(f"nvidia-ml-py {bindings}")
    shutdown = getattr(query.nvml, "nvmlShutdown", None)
    if shutdown is not None:
        with contextlib.suppress(Exception):  # a failed shutdown leaves nothing to report
            shutdown()
    return ", ".join(parts)


@dataclass(frozen=True)
class About:
    """TowerDeck's facts, as (label, value) rows; the window adds Qt's before showing them."""

    version: str
    home: Path
    installed: bool
    runs_root: Path
    python: str
    tensorflow: str
    nvml: str

    def rows(self) -> list[tuple[str, str]]:
        where = f"installed in {self.home}" if self.installed else f"running from the checkout {self.home}"
        return [
            ("Version", f"{self.version}, {where}"),
            ("Runs (data)", str(self.runs_root)),
            ("Python", self.python),
            ("TensorFlow", self.tensorflow),
            ("NVML", self.nvml),
        ]


def gather(*, with_nvml: bool = True) -> About:
    """Every fact; ``with_nvml=False`` leaves NVML unasked (``not asked``) to stay off the driver."""
    from core.run.rundir import runs_root

    return About(
        version=towerdeck_version(),
        home=HOME,
        installed=not is_checkout(),
        runs_root=runs_root(),
        python=f"{sys.version.split()[0]} ({sys.executable})",
        tensorflow=tensorflow_summary(),
        nvml=nvml_summary() if with_nvml else "not asked",
    )
