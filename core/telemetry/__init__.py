"""What trainers say, parsed: their output lines and their TensorBoard event files.

- ``metrics``: step, loss and step time from what trainers print (every format TowerDeck knows)
- ``worker_stats``: figures over a role's samples: latest step, loss, step time, smoothing
- ``step_window``: a role's last 30 s of steps, in constant memory: the raw material of the rates
- ``stragglers``: the straggler judge: a windowed median step time, a hold, hysteresis
- ``placement``: TensorFlow's device-placement log: which op runs on which device
- ``pci``: PCI bus ids, the key that joins TensorFlow's devices to NVML's GPUs
- ``live``: what the controller derives from one role's output while it runs
- ``errors``: the line that says why a trainer died
- ``regex_risk``: user regexes that could backtrack for ever, refused before they meet output
- ``tbevents``: TensorBoard event files read as they grow
- ``loss_tags``: which TensorBoard scalar tags are a loss
- ``checkpoints``: TensorFlow's ``checkpoint`` state file and the lines that say a trainer resumed, read without TensorFlow
"""
