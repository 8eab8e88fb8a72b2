"""What a simulated role prints: step/loss lines in the formats users' trainers print and the
controller's parsers read, Keras progress bars, device placement lines, a crash's traceback.

Pure functions of the step (no clock, no randomness), so a simulated run is the same every time
and its lines can be checked against the parsers. Standard library only: part of the agent.
"""

from __future__ import annotations

import math

STEPS_PER_EPOCH = 100  # Keras: steps in one epoch's progress bar
BAR_WIDTH = 30  # Keras 2's bar: ``[==========>...................]``
FORMATS = ("step", "keras", "mixed")
# ``--format=mixed``: each role prints one of these, chosen by its task index (a cluster whose
# trainers differ, as a team's do).
MIXED = ("step", "keras", "tf1")
# A simulated GPU's name, in NVML's samples and in TensorFlow's "Created device" line alike:
# "simulated" on every screen it reaches, so no simulated figure passes for a real one.
GPU_NAME = "NVIDIA H100 80GB HBM3 (simulated)"
GPU_MEMORY_MB = 79078
GPU_FIRST_BUS = 0x1A


def cost(step: int, index: int) -> float:
    """The light trainer's loss curve (resources/trainers/light_trainer.py): falling, with a little
    noise that differs between workers."""
    return 2.0 * math.exp(-step * 0.1 / 50.0) + 0.05 * ((step * 7919 + index * 104729) % 100) / 100.0


def format_of(name: str, index: int) -> str:
    """The line format a role prints: ``step``, ``keras`` or, for ``mixed``, one by task index."""
    return MIXED[index % len(MIXED)] if name == "mixed" else name


def step_text(fmt: str, step: int, *, index: int, period_s: float, total_steps: int) -> str:
    """The text one step adds to the log, ``fmt`` being ``step``, ``keras`` or ``tf1``."""
    loss = cost(step, index)
    if fmt == "tf1":
        return f"INFO:tensorflow:loss = {loss:.4f}, step = {step} ({period_s:.3f} sec)\n"
    if fmt != "keras":
        return f"Step: {step},  Cost: {loss:.4f}\n"
    epoch, n = (step - 1) // STEPS_PER_EPOCH + 1, (step - 1) % STEPS_PER_EPOCH + 1
    epochs = max(1, math.ceil(total_steps / STEPS_PER_EPOCH)) if total_steps > 0 else 1000
    head = f"Epoch {epoch}/{epochs}\n" if n == 1 else ""
    if n == STEPS_PER_EPOCH:  # the bar's last draw: the epoch's time and the step time, then a newline
        epoch_s = max(1, round(STEPS_PER_EPOCH * period_s))
        return f"{head}\r{n}/{n} [{'=' * BAR_WIDTH}] - {epoch_s}s {max(1, round(period_s * 1000))}ms/step - loss: {loss:.4f}\n"
    done = BAR_WIDTH * n // STEPS_PER_EPOCH
    bar = "=" * max(0, done - 1) + ">" + "." * (BAR_WIDTH - max(1, done))
    eta_s = math.ceil((STEPS_PER_EPOCH - n) * period_s)
    return f"{head}\r{n:>3}/{STEPS_PER_EPOCH} [{bar}] - ETA: {eta_s}s - loss: {loss:.4f}"


def bus_id(gpu: int) -> str:
    """A simulated GPU's PCI bus id as NVML writes it (TensorFlow writes it in lower case, with a
    four-digit domain: ``core.telemetry.pci`` joins the two)."""
    return f"00000000:{GPU_FIRST_BUS + gpu:02X}:00.0"


def placement_text(job: str, index: int, gpus: list[int], *, wall_s: float) -> str:
    """Device placement at a role's start, as TensorFlow prints it with placement logging on: each
    visible GPU's "Created device" line (absl-prefixed), then graph placer lines, each printed
    plainly and again behind the absl prefix (stdout and stderr go to one log)."""
    task = f"/job:{job}/replica:0/task:{index}"
    absl = f"I0000 00:00:{wall_s:.6f}    4242 "
    lines = []
    for logical, physical in enumerate(gpus):
        bus = bus_id(physical)[4:].lower()
        lines.append(
            f"{absl}gpu_device.cc:2020] Created device {task}/device:GPU:{logical} with {GPU_MEMORY_MB} MB memory:  "
            f"-> device: {logical}, name: {GPU_NAME}, pci bus id: {bus}, compute capability: 9.0"
        )
    compute = f"{task}/device:GPU:0" if gpus else f"{task}/device:CPU:0"
    ops = [
        ("global_step", "VariableV2", "/job:ps/replica:0/task:0/device:CPU:0"),
        ("dense/kernel", "VariableV2", "/job:ps/replica:0/task:0/device:CPU:0"),
        ("dense/MatMul", "MatMul", compute),
        ("dense/BiasAdd", "BiasAdd", compute),
        ("loss/Mean", "Mean", compute),
        (
            "train/update_dense/kernel/ApplyGradientDescent",
            "ApplyGradientDescent",
            "/job:ps/replica:0/task:0/device:CPU:0",
        ),
    ]
    for name, op_type, device in ops:
        line = f"{name}: ({op_type}): {device}"
        lines += [line, f"{absl}placer.cc:162] {line}"]
    return "\n".join(lines) + "\n"


def traceback_text(script: str, step: int) -> str:
    """The traceback a crash at ``step`` leaves (``--crash_at_step``): Python's own shape, so the
    controller's error finder reads it as it reads a real one."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{script}", line 212, in <module>\n'
        "    sys.exit(main())\n"
        f'  File "{script}", line 187, in main\n'
        "    train_step(step)\n"
        f'  File "{script}", line 96, in train_step\n'
        "    raise RuntimeError(message)\n"
        f"RuntimeError: simulated crash at step {step} (--crash_at_step={step})\n"
    )


def interrupt_text(script: str) -> str:
    """What Python prints when SIGINT (KeyboardInterrupt) ends a training loop."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{script}", line 187, in main\n'
        "    train_step(step)\n"
        "KeyboardInterrupt\n"
    )
