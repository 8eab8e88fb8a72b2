"""The metrics parser as it was before its speed-up (2026-11-25), kept as an oracle.

tests/telemetry/test_metrics_reference.py checks that :class:`core.telemetry.metrics.MetricParser`
gives exactly the samples this straightforward version gives (one method per format, one regex per
format), on recorded lines and on the metrics benchmark's corpus. Only the dispatch is copied; the
regexes and number helpers are the module's own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from core.telemetry.metrics import (
    _ANSI,
    _CLASSIC,
    _KERAS_EPOCH,
    _KERAS_METRIC,
    _KERAS_PROGRESS,
    _KERAS_STEP_TIME,
    _TF1_LOSS,
    _TF1_RATE,
    _UNIT_S,
    MAX_PARTIAL_LINE_CHARS,
    MetricPattern,
    MetricSample,
    _float,
    _int,
    _user_sample,
    inverse_or_none,
    positive_or_none,
)


class ReferenceParser:
    """The former MetricParser, unchanged but for its name."""

    def __init__(self, patterns: Sequence[MetricPattern] = ()) -> None:
        self._patterns = tuple(patterns)
        self._partial = ""
        self._discarding = False
        self._tf1_prev_step: int | None = None
        self._keras_epoch: int | None = None
        self._keras_base = 0
        self._keras_last_n: int | None = None
        self._keras_last_key: tuple[int | None, int, bool] | None = None

    def feed(self, text: str, t: float | None = None) -> list[MetricSample]:
        """Parse the complete lines in ``text`` (plus what earlier chunks left unfinished)."""
        if not text:
            return []
        now = time.time() if t is None else t
        if "\r" in text:
            text = text.replace("\r", "\n")
        parts = text.split("\n")
        if len(parts) == 1:
            if not self._discarding:
                if len(self._partial) + len(text) > MAX_PARTIAL_LINE_CHARS:
                    self._partial, self._discarding = "", True
                else:
                    self._partial += text
            return []
        out: list[MetricSample] = []
        if self._discarding:
            self._discarding = False
        else:
            self._parse_line(self._partial + parts[0], now, out)
        for i in range(1, len(parts) - 1):
            self._parse_line(parts[i], now, out)
        tail = parts[-1]
        if len(tail) > MAX_PARTIAL_LINE_CHARS:
            self._partial, self._discarding = "", True
        else:
            self._partial = tail
        return out

    def drop_partial(self) -> None:
        """Forget the unfinished line: the next text does not continue it (output was skipped)."""
        self._partial, self._discarding = "", False

    def flush(self, t: float | None = None) -> list[MetricSample]:
        """Parse the unfinished last line (at the end of a stream) and forget it."""
        line, self._partial, self._discarding = self._partial, "", False
        out: list[MetricSample] = []
        if line:
            self._parse_line(line, time.time() if t is None else t, out)
        return out

    def _parse_line(self, line: str, t: float, out: list[MetricSample]) -> None:
        if not line or len(line) > MAX_PARTIAL_LINE_CHARS:
            return
        for pattern in self._patterns:
            sample = _user_sample(pattern, line, t)
            if sample is not None:
                out.append(sample)
                return
        if "Cost:" in line:
            self._classic(line, t, out)
        elif "loss = " in line:
            self._tf1_loss(line, t, out)
        elif "global_step/sec" in line:
            m = _TF1_RATE(line)
            if m is not None:
                rate = _float(m["rate"])
                out.append(MetricSample(t, None, None, inverse_or_none(rate), rate, {}, "tf1_hooks"))
        elif "/" in line:
            if "\x1b" in line:
                line = _ANSI.sub("", line)
            stripped = line.lstrip()
            if stripped[:1].isdigit():
                self._keras_progress(line, t, out)
            elif stripped.startswith("Epoch "):
                self._keras_epoch_line(line)

    def _classic(self, line: str, t: float, out: list[MetricSample]) -> None:
        m = _CLASSIC.search(line)
        if m is None:
            return
        step_time_s = _float(m["time"])
        if step_time_s is not None:
            step_time_s = positive_or_none(step_time_s * _UNIT_S[m["unit"]])
        out.append(
            MetricSample(
                t, _int(m["step"]), _float(m["loss"]), step_time_s, inverse_or_none(step_time_s), {}, "classic"
            )
        )

    def _tf1_loss(self, line: str, t: float, out: list[MetricSample]) -> None:
        m = _TF1_LOSS.search(line)
        if m is None:
            return
        step = _int(m["step"])
        interval_s = _float(m["sec"])
        step_time_s = None
        prev = self._tf1_prev_step
        if step is not None and prev is not None and step > prev and interval_s is not None:
            step_time_s = positive_or_none(interval_s / (step - prev))
        self._tf1_prev_step = step
        out.append(MetricSample(t, step, _float(m["loss"]), step_time_s, inverse_or_none(step_time_s), {}, "tf1_hooks"))

    def _keras_epoch_line(self, line: str) -> None:
        m = _KERAS_EPOCH.match(line)
        if m is None:
            return
        if self._keras_last_n is not None:
            self._keras_base += self._keras_last_n
        self._keras_last_n = None
        self._keras_epoch = int(m["epoch"])

    def _keras_progress(self, line: str, t: float, out: list[MetricSample]) -> None:
        m = _KERAS_PROGRESS.match(line)
        if m is None:
            return
        n = int(m["n"])
        rest = m["rest"]
        has_step_time = "/step" in rest
        key = (self._keras_epoch, n, has_step_time)
        if key == self._keras_last_key:  # a redraw of what was already reported
            return
        step_time_s = None
        if has_step_time:
            tm = _KERAS_STEP_TIME.search(rest)
            if tm is not None:
                value = _float(tm["value"])
                step_time_s = positive_or_none(value * _UNIT_S[tm["unit"]]) if value is not None else None
        loss = None
        extra: dict[str, float] = {}
        # Metrics are " - name: value" pieces.
        if ": " in rest:
            for name, text in _KERAS_METRIC.findall(rest):
                if name == "ETA":
                    continue
                value = _float(text)
                if value is None:
                    continue
                if name == "loss":
                    loss = value
                else:
                    extra[name] = value
        if loss is None and step_time_s is None and not extra:
            return
        self._keras_last_key = key
        self._keras_last_n = n
        total = m["total"]
        if self._keras_epoch is not None and total != "Unknown":
            step = (self._keras_epoch - 1) * int(total) + n
        else:
            step = self._keras_base + n
        out.append(MetricSample(t, step, loss, step_time_s, inverse_or_none(step_time_s), extra, "keras"))
