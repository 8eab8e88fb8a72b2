"""A run's profiles (``RUN/profiles``) in TensorBoard's Profile tab: the profiler environment's
TensorBoard (with xprof's plugin), on 127.0.0.1 and a free port, through
:func:`core.run.tensorboard.serve` (ready once ``/data/plugin/profile/runs`` answers; stopped,
its whole process group, with :meth:`~core.run.tensorboard.TensorBoardServer.stop`). Each
capture's roles are its runs (``<time>/worker-0/<session>``), so the tab selects each host.
:func:`start_capture` serves one capture alone (its runs ``worker-0/<session>``): the window's
Profile tab opens the capture it shows."""

from __future__ import annotations

from pathlib import Path

from core.profiling.capture import PROFILES_DIR, list_captures
from core.profiling.env import ProfileError, profiler_python
from core.run.tensorboard import EventDirs, TensorBoardError, TensorBoardServer, serve

READY_PATH = "/data/plugin/profile/runs"


def start_profiles(run_path: Path, timeout_s: float = 90.0) -> TensorBoardServer:
    """TensorBoard on ``run_path``'s profiles; raises TensorBoardError (none captured, no
    profiler environment, it did not come up)."""
    if not list_captures(run_path):
        raise TensorBoardError(f"no profile captured in {run_path.name} yet: `ctl RUN profile ROLE` takes one")
    try:
        program = profiler_python().parent / "tensorboard"
    except ProfileError as exc:
        raise TensorBoardError(str(exc)) from None
    folder = run_path / PROFILES_DIR
    dirs = EventDirs({PROFILES_DIR: folder}, {})
    return serve(program, ["--logdir", str(folder)], dirs, timeout_s=timeout_s, ready_path=READY_PATH)


def start_capture(folder: Path, timeout_s: float = 90.0) -> TensorBoardServer:
    """TensorBoard on the one capture ``folder`` (``RUN/profiles/<time>``); raises TensorBoardError
    (no role's profile in it, no profiler environment, it did not come up)."""
    if not folder.is_dir() or not any(folder.rglob("*.xplane.pb")):
        raise TensorBoardError(f"the capture {folder.name} holds no role's profile to show")
    try:
        program = profiler_python().parent / "tensorboard"
    except ProfileError as exc:
        raise TensorBoardError(str(exc)) from None
    dirs = EventDirs({folder.name: folder}, {})
    return serve(program, ["--logdir", str(folder)], dirs, timeout_s=timeout_s, ready_path=READY_PATH)


def profile_url(server: TensorBoardServer) -> str:
    """The address of TensorBoard's Profile tab on ``server``."""
    return f"{server.url}#profile"
