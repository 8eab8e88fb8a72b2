"""``python -m core.agent`` (from a checkout) runs the agent as the zipapp does."""

from __future__ import annotations

import sys

from core.agent.main import main

sys.exit(main())
