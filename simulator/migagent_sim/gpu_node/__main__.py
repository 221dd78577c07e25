"""`python -m migagent_sim.gpu_node`: a simulated GPU node for any NVML client.

    run   --state FILE [--spec SPEC] [--lib DIR] -- COMMAND [ARG...]
          COMMAND on the node: the fake libnvidia-ml.so.1 and nvidia-smi first on LD_LIBRARY_PATH and
          PATH, MIGAGENT_FAKE_NVML_STATE/SPEC set, the driver's files at their paths (a private mount
          namespace; needs root). Exits with COMMAND's status.
    files --state FILE [--spec SPEC] [--lib DIR] --root DIR
          Only write the node's files under DIR (proc/, sys/, dev/, and with the library a driver
          root: usr/bin/nvidia-smi, usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1), for tools that take
          a --dev-root or driver root.
    lib   Print the directory of the fake library (building it from this checkout when needed).

The state file is the node: created from --spec (e.g. 8xH100-80GB-SXM) when it does not exist, and
shared by every command run on it, concurrently or not.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from migagent_sim.fakelib.node import NodeConfigError, StateFileNode
from migagent_sim.gpu_node.files import write_tree
from migagent_sim.gpu_node.library import LibraryError, library_dir
from migagent_sim.gpu_node.node_gpus import gpu_facts
from migagent_sim.gpu_node.run import run_on_node


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m migagent_sim.gpu_node", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="what", required=True)
    for name in ("run", "files"):
        sub = commands.add_parser(name)
        sub.add_argument("--state", type=Path, required=True, help="the node's state file (created from --spec)")
        sub.add_argument("--spec", help="GPUs of a new node, e.g. 8xH100-80GB-SXM or 2xA100-80GB,2xA30-24GB")
        sub.add_argument("--lib", type=Path, help="directory built by scripts/build_fake_nvml.sh")
    commands.choices["files"].add_argument("--root", type=Path, required=True, help="where to write the files")
    commands.choices["run"].add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    commands.add_parser("lib")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.what == "lib":
            print(library_dir())
            return 0
        if not args.state.exists() and args.spec is None:
            parser.error(
                f"{args.what}: --state {args.state} does not exist; add --spec (e.g. 8xH100-80GB-SXM) to create it"
            )
        library = library_dir(args.lib)
        if args.what == "files":
            node = StateFileNode(args.state.resolve(), spec=args.spec).current_state()
            write_tree(args.root, gpu_facts(node), library_dir=library)
            return 0
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("run: name the command after --")
        return run_on_node(command, state=args.state, spec=args.spec, library=library)
    except (NodeConfigError, LibraryError, FileExistsError) as exc:
        print(f"gpu_node: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
