"""TowerDeck as an installed program: its version and what it runs with (the window's Help > About
and ``--version``), and its entry in the desktop's application menu (``install-desktop``). No Qt:
the window adds Qt's own versions and where its settings live.

- ``about``: the version, where runs live, the TensorFlow and NVML this python finds
- ``desktop``: the freedesktop.org desktop entry and icon under ``$XDG_DATA_HOME``
"""
