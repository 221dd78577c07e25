"""The cluster a pool command talks to, and the layout file it reads, from its flags (`rollout`, `advise`,
`autopilot`): --kubeconfig / --api-server, --namespace (where the state objects live) and
--layouts-namespace (where the agents' layouts ConfigMap is; a command without it reads the layouts
where its --namespace points), and -f (read when the flags were parsed, else that ConfigMap)."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from migagent.clock import Clock
from migagent.node.names import ROLLOUT_NAMESPACE
from migagent.rollout.state import Layouts

if TYPE_CHECKING:
    from migagent.kube.demand_api import DemandApi
    from migagent.kube.rollout_api import RolloutApi


def pool_api(args: argparse.Namespace, clock: Clock) -> DemandApi:
    """The pool's API (the rollout's, and the demand's reads besides)."""
    # Imported here: the Kubernetes client takes over a second to import, and `--help`, a refused flag or
    # an unreadable -f need none of it.
    from migagent.cli.status import _default_kubeconfig  # noqa: PLC0415
    from migagent.kube.client import make_api_client  # noqa: PLC0415
    from migagent.kube.demand_api import DemandApi  # noqa: PLC0415

    if not args.debug:  # urllib3 logs each connection retry; the one error line says it all
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    client = make_api_client(kubeconfig=_default_kubeconfig(args.kubeconfig), api_server=args.api_server)
    namespace = getattr(args, "namespace", ROLLOUT_NAMESPACE)
    given = getattr(args, "layout_file", None)
    return DemandApi(client, clock=clock, namespace=namespace, layouts_text=given.text if given else None,
                     layouts_namespace=getattr(args, "layouts_namespace", None) or namespace)


def file_layouts(args: argparse.Namespace) -> Layouts | None:
    """-f (read when the flags were parsed, cli/rollout_flags.layout_file), parsed before the cluster is read."""
    given = args.layout_file
    return None if given is None else Layouts.parse(given.text, source=given.path)


def pool_layouts(api: RolloutApi, given: Layouts | None) -> Layouts:
    """-f's layouts, else the agents' layouts ConfigMap's."""
    source = f"the migagent-layouts ConfigMap in namespace {api.layouts_namespace}"
    return given or Layouts.parse(api.read_layouts(), source=source)
