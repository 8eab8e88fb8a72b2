"""What the controller derives from one role's output while it runs: training metrics and placement."""

from __future__ import annotations

from typing import Any

from core.telemetry.metrics import MetricParser, MetricPattern, MetricSample, SlowPattern
from core.telemetry.placement import PlacementAggregator
from core.telemetry.worker_stats import WorkerStats


class RoleTelemetry:
    """Feeds a role's output to a metric parser and a placement aggregator, both bounded."""

    def __init__(self, patterns: tuple[str, ...] = ()) -> None:
        self.patterns = [MetricPattern(p) for p in patterns]
        self.parser = MetricParser(self.patterns)
        self.stats = WorkerStats()
        self.placement = PlacementAggregator()

    def new_attempt(self) -> None:
        """A restart: a new output stream (the stats and the placement table carry on)."""
        self.parser = MetricParser(self.patterns)
        self.placement.flush()

    def break_stream(self) -> None:
        """Output was skipped: what comes next starts a line, it does not finish the last one."""
        self.parser.drop_partial()
        self.placement.drop_partial()

    def feed(self, text: str, t: float) -> list[MetricSample]:
        samples = self.parser.feed(text, t)
        for sample in samples:
            self.stats.add(sample)
        self.placement.feed_stream(text, t)
        return samples

    def take_slow_patterns(self) -> list[SlowPattern]:
        """Patterns that overran their time limit on a line since the last call: turned off for
        this role, restarts included (a new attempt prints the same lines)."""
        slow = self.parser.take_slow_patterns()
        if slow:
            off = {s.regex for s in slow}
            self.patterns = [p for p in self.patterns if p.regex not in off]
        return slow


def sample_dict(sample: MetricSample) -> dict[str, Any]:
    """A sample as a metrics.jsonl record: ``dataclasses.asdict`` spelled out, since its recursive
    copy was ~6 % of the controller's samples at 64 workers (a record a step line)."""
    s = sample
    return {
        "t": s.t,
        "step": s.step,
        "loss": s.loss,
        "step_time_s": s.step_time_s,
        "steps_per_sec": s.steps_per_sec,
        "extra": dict(s.extra),
        "source": s.source,
    }
