"""The cluster a pool command talks to, and the layout file it reads, from its flags (`rollout`, `advise`,
`autopilot`): --kubeconfig / --api-server / --namespace, and -f (else the agents' layouts ConfigMap)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from migagent.cli.status import _default_kubeconfig
from migagent.clock import Clock
from migagent.errors import UsageError
from migagent.kube.client import make_api_client
from migagent.kube.demand_api import DemandApi
from migagent.kube.rollout_api import RolloutApi


def pool_api(args: argparse.Namespace, clock: Clock) -> DemandApi:
    """The pool's API (the rollout's, and the demand's reads besides)."""
    if not args.debug:  # urllib3 logs each connection retry; the one error line says it all
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    client = make_api_client(kubeconfig=_default_kubeconfig(args.kubeconfig), api_server=args.api_server)
    return DemandApi(client, clock=clock, namespace=args.namespace)


def layouts_text(args: argparse.Namespace, api: RolloutApi) -> str:
    if args.layout_file:
        try:
            return Path(args.layout_file).read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"-f {args.layout_file}: cannot read it: {error.strerror}") from error
    return api.read_layouts()
