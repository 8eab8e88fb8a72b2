"""Why a role waits.

- ``lines``: TensorFlow's waiting lines recognised (pure)
- ``rules``: those lines judged with the roles' states into a :class:`~core.diagnosis.rules.Diagnosis` (waiting for whom, why, how certain, the fix)
- ``wording``: the words of its messages, and the lines the CLI prints
"""
