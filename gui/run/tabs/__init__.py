"""The run's tabs; each draws its model from ``core/views``.

- ``training``: loss and step time per worker, cluster steps/s
- ``spread``: the cluster's spread past a handful of workers
- ``spread_menu``: *Profile* and *Why* on the workers the spread view names
- ``gpus``: per host and GPU: utilisation, memory, temperature, power, roles
- ``logs``: a role's live output with search, follow and a level filter
- ``placement``: ops per device, and the op table
- ``profile``: a run's stored profile captures, roles side by side
- ``plotting``: what every plot does to be drawn at 60 Hz
- ``checkpoints``: the run's checkpoints on the Training tab: marks on the step axis and a short list
"""
