"""Wiring: from settings to ports, between `cli/` (flags only) and `loops/` (the agent and host loops)."""

from __future__ import annotations

from migagent.wiring.agent import RESTART_STRATEGIES, AgentOptions, build_agent

__all__ = ["RESTART_STRATEGIES", "AgentOptions", "build_agent"]
