"""The verdict of *why is this worker slow?*, kept with its capture.

``ctl RUN why`` and the window's *Why* write ``why.json`` beside ``profile.json`` in the capture's
folder (``RUN/profiles/<timestamp>/``): the two roles compared (the straggler first), the cause,
the sentence and its evidence. ``profile-summary`` and the Profile tab read it back when the
capture is reopened; a capture made by *Profile* has none, and opens as before.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from core.profiling.env import ProfileError
from core.profiling.files import WHY_NAME, write_whole
from core.profiling.why import Verdict

__all__ = ["WHY_NAME", "WhyRecord", "load_why", "save_why"]


@dataclass(frozen=True)
class WhyRecord:
    """One stored verdict: the straggler, the median worker it was compared with, the verdict."""

    straggler: str
    median: str
    verdict: Verdict

    @property
    def question(self) -> str:
        return f"Why is {self.straggler} slow?"

    def lines(self) -> list[str]:
        """The question and its answer, then the evidence, as the CLI prints them."""
        return [f"why is {self.straggler} slow? {self.verdict.sentence}", *(f"  {e}" for e in self.verdict.evidence)]


def save_why(folder: Path, record: WhyRecord) -> Path:
    """Write ``why.json`` into the capture ``folder`` (atomically: a reader never sees half of it);
    ProfileError, naming the file, when the disk refuses."""
    data = {
        "t": round(time.time(), 3),
        "straggler": record.straggler,
        "median": record.median,
        "roles": [record.straggler, record.median],
        "cause": record.verdict.cause,
        "sentence": record.verdict.sentence,
        "evidence": list(record.verdict.evidence),
    }
    write_whole(folder / WHY_NAME, json.dumps(data, indent=2) + "\n")
    return folder / WHY_NAME


def load_why(folder: Path) -> WhyRecord | None:
    """The verdict stored with the capture ``folder``; None when it has none (a plain *Profile*).
    Raises ProfileError, one line, when the file is there but unreadable."""
    path = folder / WHY_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path} is unreadable: {exc}") from None
    try:
        verdict = Verdict(str(data["cause"]), str(data["sentence"]), tuple(str(e) for e in data["evidence"]))
        return WhyRecord(str(data["straggler"]), str(data["median"]), verdict)
    except KeyError as exc:
        raise ProfileError(f"{path} is unreadable: it has no {exc} field") from None
    except TypeError:
        raise ProfileError(f"{path} is unreadable: not a verdict") from None
