"""The commands the simulator adds to `migagent` (entry-point group `migagent.commands`).

Kept apart from the commands' own modules so that `migagent --help` can list them without importing
the Kubernetes client.
"""

from __future__ import annotations

from migagent.cli.commands import Command

DEMO = Command(
    "demo", "migagent_sim.demo", "register",
    "run the agent against a simulated 8-GPU node and a fake API server, printing each step"
    " (`demo rollout`: a 6-node pool rolled in waves, a halt and a resume; `demo autopilot`: layouts following"
    " demand)",
)
