"""Why a role waits: ``lines`` recognises TensorFlow's waiting lines (pure), ``rules`` judges
them with the roles' states into :class:`~core.diagnosis.rules.Diagnosis` (waiting for whom, why,
how certain, the fix), ``wording`` holds the words of its messages and the lines the CLI prints.
"""
