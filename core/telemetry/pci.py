"""PCI bus ids: the key that joins TensorFlow's devices to NVML's GPUs.

TensorFlow names the physical GPU behind ``/device:GPU:0`` in its start-up line (``pci bus id:
0000:1a:00.0``, see :mod:`core.telemetry.placement`); NVML reports ``00000000:1A:00.0`` for the
same card (an eight-digit domain, upper case). Both are brought to one spelling before they are
compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def normalize_bus_id(bus_id: str | None) -> str | None:
    """``00000000:1A:00.0`` (NVML) and ``0000:1a:00.0`` (TensorFlow) -> ``0000:1a:00.0``."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return bus_id.strip().lower()
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return bus_id.strip().lower()
    return f"{domain:04x}:{parts[1]}:{parts[2]}"


def tf_devices_by_bus(placement: Callable[[str], dict[str, Any]], roles: list[str]) -> dict[str, list[str]]:
    """TensorFlow's devices of ``roles`` by normalized PCI bus id (``worker:0 /device:GPU:0``);
    ``placement(role)`` is the source's placement summary (its ``devices`` carry ``pci_bus_id``)."""
    out: dict[str, list[str]] = {}
    for role in roles:
        for device in placement(role).get("devices") or []:
            bus = normalize_bus_id(device.get("pci_bus_id"))
            if bus:
                out.setdefault(bus, []).append(f"{role} {device.get('device', '')}")
    return out
