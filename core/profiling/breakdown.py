"""A capture's one breakdown: computed once, kept with the capture, shown by every view.

``ctl RUN profile``, ``ctl RUN why``, ``profile-summary``, the window's Profile tab and its verdict
box all show the breakdown :func:`capture_breakdown` gives: each captured role's profile from xprof
(:func:`core.profiling.summary.summarize`, seconds in the profiler environment) with tf.data's time
counted as input where the step table counted none
(:func:`core.profiling.summary.with_input_ops`). It is stored in the capture's ``profile.json``
the first time it is computed, so a capture reopened later (or in another view) shows the same
figures at once, and a verdict given on it is explained by the figures shown beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.profiling.capture import Capture
from core.profiling.env import ProfileError
from core.profiling.files import CaptureRecord, read_record, save_breakdown
from core.profiling.summary import RoleProfile, summarize, with_input_ops

SUMMARY_TIMEOUT_S = 120.0  # xprof reads a 5 MB profile in under a second; past this it is stuck


@dataclass(frozen=True)
class CaptureBreakdown:
    """A capture's record and its breakdown (each captured role's profile, in the order asked);
    ``problem`` says why it could not be kept with the capture (it is still the one shown)."""

    record: CaptureRecord
    profiles: tuple[RoleProfile, ...]
    problem: str | None = None


def capture_breakdown(folder: Path, *, timeout_s: float = SUMMARY_TIMEOUT_S) -> CaptureBreakdown:
    """The breakdown of the capture ``folder``: the stored one, else computed (in the profiler
    environment: call it off the GUI thread) and stored. Raises ProfileError, one line, when the
    record or a role's file cannot be read."""
    record = read_record(folder)
    if record.breakdown is not None:
        return CaptureBreakdown(record, record.breakdown)
    if not record.xplanes:
        return CaptureBreakdown(record, ())
    profiles = tuple(with_input_ops(p) for p in summarize(record.xplanes, timeout_s=timeout_s))
    try:
        save_breakdown(folder, profiles)
    except ProfileError as exc:  # a read-only past run, a full disk: shown, computed again next time
        return CaptureBreakdown(record, profiles, f"the breakdown was not kept with the capture: {exc}")
    return CaptureBreakdown(record, profiles)


def breakdown_after(capture: Capture, *, timeout_s: float = SUMMARY_TIMEOUT_S) -> CaptureBreakdown | None:
    """The breakdown of a capture just taken, kept with it; None when no role was captured. Where
    its record could not be written (``capture.problem``: a full disk), computed from the capture
    itself and not kept. Raises ProfileError, one line, when a role's file cannot be read."""
    xplanes = capture.xplanes()
    if not xplanes:
        return None
    if capture.problem is None:
        found = capture_breakdown(capture.path, timeout_s=timeout_s)
        if found.record.roles == list(xplanes):
            return found
    record = CaptureRecord(capture.path, xplanes, [], asked=tuple(xplanes), seconds=capture.seconds)
    profiles = tuple(with_input_ops(p) for p in summarize(xplanes, timeout_s=timeout_s))
    return CaptureBreakdown(record, profiles, capture.problem)
