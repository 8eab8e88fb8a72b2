"""The GPU proof's figures, from what scripts/gpu_proof.py collected: TowerDeck's samples against
nvidia-smi's, the GPU -> role mapping three ways, the cost of sampling (A/B), the agent's CPU and
the sampling period achieved. Pure functions of plain data; :func:`markdown` writes report.md."""

from __future__ import annotations

import statistics
from typing import Any

MIB = 1 << 20
# TowerDeck's field, nvidia-smi's --query-gpu field, the unit both are compared in, and the
# factor from TowerDeck's unit to it.
FIGURES = (
    ("utilization_gpu_percent", "utilization.gpu", "%", 1.0),
    ("memory_used_bytes", "memory.used", "MiB", 1.0 / MIB),
    ("temperature_c", "temperature.gpu", "C", 1.0),
    ("power_w", "power.draw", "W", 1.0),
)
SMI_GPU_FIELDS = ("index", "pci.bus_id", *(f[1] for f in FIGURES))
SMI_APP_FIELDS = ("pid", "used_memory", "gpu_bus_id")


def parse_csv(text: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """nvidia-smi's ``--format=csv,noheader,nounits`` lines as dicts."""
    rows = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values, strict=True)))
    return rows


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None  # [N/A], [Not Supported]


def _bus(bus_id: Any) -> str:
    """PCI bus ids as NVML and nvidia-smi write them differ in the domain's width: compare the rest."""
    return str(bus_id or "").upper().split(":", 1)[-1]


def compare_figures(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's |TowerDeck - nvidia-smi| over every (sample, nvidia-smi) pair, per GPU joined
    by PCI bus id: {figure: {unit, n, max, median}}, plus how far apart the two readings were."""
    diffs: dict[str, list[float]] = {f[0]: [] for f in FIGURES}
    seen: dict[str, list[float]] = {f[0]: [] for f in FIGURES}  # TowerDeck's own values, in the unit
    skews = []
    for pair in pairs:
        smi = {_bus(row.get("pci.bus_id")): row for row in pair["smi_gpus"]}
        skews.append(pair["smi_t"] - pair["sample_t"])
        for gpu in pair["gpus"]:
            row = smi.get(_bus(gpu.get("pci_bus_id")))
            if row is None:
                continue
            for ours, theirs, _unit, factor in FIGURES:
                a, b = gpu.get(ours), _number(row.get(theirs))
                if isinstance(a, (int, float)) and b is not None:
                    diffs[ours].append(abs(a * factor - b))
                    seen[ours].append(a * factor)
    out: dict[str, Any] = {}
    for ours, theirs, unit, _factor in FIGURES:
        values = diffs[ours]
        out[ours] = {
            "nvidia_smi_field": theirs,
            "unit": unit,
            "n": len(values),
            "max": round(max(values), 3) if values else None,
            "median": round(statistics.median(values), 3) if values else None,
            "towerdeck_min": round(min(seen[ours]), 3) if seen[ours] else None,
            "towerdeck_max": round(max(seen[ours]), 3) if seen[ours] else None,
        }
    out["reading_gap_s"] = {
        "median": round(statistics.median(skews), 3) if skews else None,
        "max": round(max(skews), 3) if skews else None,
    }
    return out


def compare_mapping(
    sample_gpus: list[dict[str, Any]],
    smi_gpus: list[dict[str, str]],
    smi_apps: list[dict[str, str]],
    trees: dict[str, list[int]],
    expected: dict[str, list[int]],
) -> list[dict[str, Any]]:
    """Per GPU: the roles TowerDeck says are on it, the roles owning nvidia-smi's compute apps
    (by the roles' process trees), the roles the cluster gave it (``gpus = [i]``), and whether
    the three agree."""
    role_of_pid = {pid: role for role, pids in trees.items() for pid in pids}
    index_of_bus = {
        _bus(row.get("pci.bus_id")): int(row["index"]) for row in smi_gpus if row.get("index", "").isdigit()
    }
    rows = []
    for gpu in sample_gpus:
        index = gpu.get("index")
        bus = _bus(gpu.get("pci_bus_id"))
        towerdeck = sorted({p["role"] for p in gpu.get("processes") or [] if p.get("role")})
        apps = [a for a in smi_apps if _bus(a.get("gpu_bus_id")) == bus]
        smi_roles = sorted({role_of_pid.get(int(a["pid"]), "?") for a in apps if a.get("pid", "").isdigit()})
        wanted = sorted(role for role, gpus in expected.items() if index in gpus)
        rows.append(
            {
                "index": index,
                "pci_bus_id": gpu.get("pci_bus_id"),
                "nvidia_smi_index": index_of_bus.get(bus),
                "towerdeck_roles": towerdeck,
                "nvidia_smi_pids": [a.get("pid") for a in apps],
                "nvidia_smi_memory_mib": [a.get("used_memory") for a in apps],
                "nvidia_smi_roles": smi_roles,
                "cluster_roles": wanted,
                "agree": towerdeck == smi_roles == wanted,
            }
        )
    return rows


def overhead(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Steps/s with sampling on vs off: per phase, the mean over roles, and on/off as a ratio of
    the means (1.0: sampling costs nothing; 0.98: the loop ran 2% slower while sampled)."""
    on = [p["steps_per_s"] for p in phases if p["sampling"] and p["steps_per_s"]]
    off = [p["steps_per_s"] for p in phases if not p["sampling"] and p["steps_per_s"]]
    ratio = round(statistics.mean(on) / statistics.mean(off), 4) if on and off else None
    return {"on_steps_per_s": on, "off_steps_per_s": off, "ratio_on_over_off": ratio}


def period(gaps_s: list[float], configured_s: float) -> dict[str, Any]:
    """The sampling period achieved, from the gaps between consecutive samples of on-phases."""
    gaps = sorted(gaps_s)
    if not gaps:
        return {"configured_s": configured_s, "n": 0}
    return {
        "configured_s": configured_s,
        "n": len(gaps),
        "median_s": round(statistics.median(gaps), 4),
        "p95_s": round(gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))], 4),
        "max_s": round(gaps[-1], 4),
    }


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return "-" if value is None else str(value)


def markdown(report: dict[str, Any]) -> str:
    """report.md: what ran where, then each section's table."""
    env = report["environment"]
    lines = ["# TowerDeck GPU proof", ""]
    if env["nvml_double"]:
        lines += [
            "**This run used the NVML double (tests/helpers/fake_nvml.py) and a stand-in nvidia-smi that reads it,",
            f"with a `{env['load']}` load: it proves the kit and the code paths, NOT any figure of a real GPU.**",
            "",
        ]
    lines += [
        f"- GPUs: {', '.join(env['gpu_names'])}; driver {env['driver']}",
        f"- python {env['python']}, load `{env['load']}`, psutil {'yes' if env['psutil'] else 'no'}, "
        f"started {env['started']}, {env['duration_s']} s",
        f"- roles: {', '.join(f'{r} on GPU {g}' for r, g in report['cluster'].items())}",
        "",
        "## TowerDeck's figures vs nvidia-smi at the same moments",
        "",
        "| figure | nvidia-smi | unit | pairs | max abs diff | median abs diff | TowerDeck's range |",
        "|---|---|---|---|---|---|---|",
    ]
    figures = report["figures"]
    for name, _smi, _unit, _f in FIGURES:
        f = figures[name]
        lines.append(
            f"| {name} | {f['nvidia_smi_field']} | {f['unit']} | {f['n']} | {_cell(f['max'])} | {_cell(f['median'])} "
            f"| {_cell(f['towerdeck_min'])} to {_cell(f['towerdeck_max'])} |"
        )
    gap = figures["reading_gap_s"]
    lines += [
        "",
        f"nvidia-smi read {_cell(gap['median'])} s (median; max {_cell(gap['max'])} s) after TowerDeck's sample.",
        "",
    ]
    lines += [
        "## GPU -> role",
        "",
        "| GPU | bus id | TowerDeck | nvidia-smi pids | their memory MiB | by process tree | cluster file | agree |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["mapping"]:
        lines.append(
            f"| {row['index']} | {row['pci_bus_id']} | {_cell(row['towerdeck_roles'])} | {_cell(row['nvidia_smi_pids'])} "
            f"| {_cell(row['nvidia_smi_memory_mib'])} | {_cell(row['nvidia_smi_roles'])} | {_cell(row['cluster_roles'])} "
            f"| {'yes' if row['agree'] else 'NO'} |"
        )
    ov = report["overhead"]
    lines += [
        "",
        "## Monitoring overhead (sampling on/off alternated: A/B/A/B)",
        "",
        "nvidia-smi is not run during these phases.",
        "",
        "| phase | sampling | seconds | steps/s (mean over roles) | agent CPU % | samples |",
        "|---|---|---|---|---|---|",
    ]
    for i, p in enumerate(report["phases"]):
        lines.append(
            f"| {i + 1} | {'on' if p['sampling'] else 'off'} | {p['seconds']} | {_cell(p['steps_per_s'])} "
            f"| {_cell(p['agent_cpu_percent'])} | {p['samples']} |"
        )
    per = report["period"]
    lines += [
        "",
        f"steps/s on / off: **{_cell(ov['ratio_on_over_off'])}**",
        "",
        "## Sampling period achieved",
        "",
        f"configured {per['configured_s']} s; over {per['n']} gaps: median {_cell(per.get('median_s'))} s, "
        f"p95 {_cell(per.get('p95_s'))} s, max {_cell(per.get('max_s'))} s",
        "",
        f"Left behind after stopping: {_cell(report['left_behind']) if report['left_behind'] else 'nothing'}.",
        "",
    ]
    return "\n".join(lines)
