"""How the wheel lays TowerDeck out: everything under one ``towerdeck/`` folder of site-packages.

The checkout keeps ``core/``, ``gui/`` and ``resources/`` at its top (``python main.py`` runs from
it); installed, they become ``towerdeck/core``, ``towerdeck/gui``, ``towerdeck/resources`` and
``towerdeck/main.py``, whose first lines put ``towerdeck/`` on ``sys.path``. So ``core`` and
``gui``, names other distributions use too, never land at the top of a shared site-packages,
where one package's files would overwrite the other's. The metadata is in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
TOP = ("core", "gui", "resources")
SKIPPED = {"__pycache__"}


def _folders() -> list[Path]:
    """Every folder of the shipped trees (a package, or resources' data and trainers)."""
    found = []
    for top in TOP:
        for folder in sorted([HERE / top, *(HERE / top).rglob("*")]):
            if folder.is_dir() and not SKIPPED & set(folder.relative_to(HERE).parts):
                found.append(folder.relative_to(HERE))
    return found


def _data(folder: Path) -> list[str]:
    """The files of ``folder`` that are not Python modules (the demo's TOML, the icon)."""
    return sorted(p.name for p in (HERE / folder).iterdir() if p.is_file() and p.suffix not in (".py", ".pyc"))


class _BuildPy(build_py):  # type: ignore[misc]
    """Of the checkout's top-level modules, only main.py is TowerDeck (not this file)."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        return [m for m in modules if package != "towerdeck" or m[1] == "main"]


folders = _folders()
packages = ["towerdeck", *("towerdeck." + ".".join(f.parts) for f in folders)]
setup(
    # "towerdeck" is the checkout's top: of its modules only main.py ships (_BuildPy).
    packages=packages,
    package_dir={"towerdeck": "."},
    package_data={"towerdeck." + ".".join(f.parts): _data(f) for f in folders if _data(f)},
    include_package_data=False,
    cmdclass={"build_py": _BuildPy},
)
