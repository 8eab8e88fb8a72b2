"""A Slurm run's ``slurm`` record (kept by core.controller.slurm) in words, once for both faces:
:func:`slurm_lines` for the CLI's ``launch``, ``attach`` and ``ctl status``, :func:`slurm_banner`
for the window's header. Both say the job, its pending reason, its nodes and how it ended alike."""

from __future__ import annotations

from typing import Any


def _job(record: dict[str, Any]) -> str:
    """``Slurm job J`` (``?`` until Slurm gave the job an id)."""
    return f"Slurm job {record.get('job_id') or '?'}"


def _pending(record: dict[str, Any]) -> str:
    """``pending`` and Slurm's reason for it, if any: ``pending (Resources)``."""
    reason = record.get("reason")
    return "pending" + (f" ({reason})" if reason else "")


def _ended(record: dict[str, Any]) -> str:
    """How the job ended: ``Slurm job J: REASON``, or ``Slurm: REASON`` when it never had an id."""
    return f"{_job(record)}: {record.get('reason')}" if record.get("job_id") else f"Slurm: {record.get('reason')}"


def slurm_lines(record: dict[str, Any]) -> list[str]:
    """The record in lines for the CLI: why it waits, where it runs, how it ended."""
    state = record.get("state")
    if state == "pending":
        return [f"waiting for {_job(record)}: {_pending(record)}"]
    if state == "running" and not record.get("steps"):
        partition = f" (partition {record['partition']})" if record.get("partition") else ""
        return [f"{_job(record)} on {record.get('nodelist') or '?'}{partition}"]
    if state == "running":
        steps = ", ".join(f"{host}: step {step}" for host, step in (record.get("steps") or {}).items())
        return [f"{_job(record)} agents: {steps}"]
    if state == "cancelled":
        return [f"{_job(record)} cancelled: {record.get('reason')}"]
    if state in ("ended", "failed"):
        return [_ended(record)]
    return []


def slurm_banner(record: dict[str, Any]) -> str:
    """The record in a few words for the window's header: ``Slurm job J on NODES``,
    ``Slurm job J pending (REASON)``, or how it ended."""
    state = record.get("state")
    if not record.get("job_id"):
        return "Slurm: submitting" if state == "submitting" else f"Slurm: {record.get('reason') or state}"
    if state == "pending":
        return f"{_job(record)} {_pending(record)}"
    if state in ("ended", "failed"):
        return _ended(record)
    where = f" on {record['nodelist']}" if record.get("nodelist") else ""
    return f"{_job(record)}{where}" + (" (cancelled at the end)" if state == "cancelled" else "")
