"""Small layout files for H100-class (80 GB) GPUs, as tests and benches write them (mig-parted v1)."""

from __future__ import annotations

ALL_1G = """\
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""
"""One config: seven 1g.10gb on every GPU."""

ALL_1G_AND_BALANCED = (
    ALL_1G
    + """\
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
"""
)
"""`all-1g.10gb`, and `all-balanced` (two 1g.10gb kept, a 2g.20gb and a 3g.40gb made of the rest)."""
