"""How long a test lets a demo run before calling it stuck."""

STUCK_DEMO = ("--timeout", "600")
"""A bound on a stuck demo, never an expectation of speed: the demos' default (45 s) is a user's wait on
an idle machine, and a loaded machine ran past it with nothing stuck (demo autopilot at load 20)."""
