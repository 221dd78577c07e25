"""`.ci/run` as CI runs it, timed stage by stage: `python -m bench.ci_time [--cold]`.

Clones this repository's HEAD into a temporary folder (a clean clone, as CI has), runs its `.ci/run`,
and prints the seconds of each stage (the `-- NAME: Ns` lines `.ci/run` prints) and the total. With
`--cold`, every cache the run would find is replaced by an empty folder of its own: the Go build and
module caches, pip's cache, the fake NVML library's, and the folders the control plane, NVIDIA's tools,
nvidia-ctk and the real node are built into, so the run builds everything as a new machine does (the Debian
packages installed on this machine stay installed). Exits with `.ci/run`'s status; its output is kept
in the printed log file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"^-- (?P<name>.+): (?P<seconds>\d+)s$")
COLD_FOLDERS = {
    "GOCACHE": "go-build",
    "GOMODCACHE": "go-mod",
    "XDG_CACHE_HOME": "xdg-cache",
    "PIP_CACHE_DIR": "pip",
    "MIGAGENT_CONTROL_PLANE_DIR": "control-plane",
    "MIGAGENT_NVIDIA_TOOLS_DIR": "nvidia-tools",
    "MIGAGENT_NVIDIA_CTK_DIR": "nvidia-ctk",
    "MIGAGENT_REAL_NODE_DIR": "real-node",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ci_time", description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="empty caches: build everything as a new machine does")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ci-time-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "/.venv/" not in f"{p}/")
    if args.cold:
        for variable, folder in COLD_FOLDERS.items():
            (work / "cold" / folder).mkdir(parents=True)
            env[variable] = str(work / "cold" / folder)
    log = work / "ci.log"
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run([str(clone / ".ci/run")], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
                              check=False)
    wall = time.monotonic() - started
    stages = [(m["name"], int(m["seconds"])) for line in log.read_text(encoding="utf-8").splitlines()
              if (m := STAGE.match(line.strip()))]
    caches = "cold caches (empty Go, pip and build folders)" if args.cold else "warm caches"
    print(f".ci/run on a clean clone of {commit}, {caches}: exit {done.returncode} in {wall / 60:.1f} min")
    width = max((len(name) for name, _ in stages), default=10)
    for name, seconds in stages:
        print(f"  {name:<{width}}  {seconds:>5d} s")
    print(f"  {'total':<{width}}  {round(wall):>5d} s")
    print("  (background stages overlap the foreground ones: their seconds do not add up to the total)")
    if done.returncode == 0:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"log: {log}", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
