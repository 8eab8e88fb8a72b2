"""Slurm: one allocation per run, one agent step per node (no Qt, no TensorFlow here)."""
