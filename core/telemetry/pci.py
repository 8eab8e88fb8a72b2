"""PCI bus ids: the key that joins TensorFlow's devices to NVML's GPUs.

TensorFlow names the physical GPU behind ``/device:GPU:0`` in its start-up line (``pci bus id:
0000:1a:00.0``, see :mod:`core.telemetry.placement`); NVML reports ``00000000:1A:00.0`` for the
same card (an eight-digit domain, upper case). Both are brought to one spelling before they are
compared.
"""

from __future__ import annotations


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
