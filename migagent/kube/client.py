"""Build the `kubernetes` ApiClient: an explicit server URL (the simulator), a kubeconfig, or in-cluster."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import yaml
from kubernetes import config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException

from migagent.errors import PermanentError

if TYPE_CHECKING:
    from kubernetes.client import CustomObjectsApi

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def make_api_client(*, kubeconfig: str | None, api_server: str | None) -> ApiClient:
    """An ApiClient for `api_server` if given, else for `kubeconfig`, else the in-cluster service account.

    With both, the kubeconfig supplies credentials and `api_server` overrides its server URL.
    A proxy from the environment is never used for a loopback server (the simulator).
    """
    configuration = Configuration()
    try:
        if kubeconfig is not None:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=configuration
            )
        elif api_server is None:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    # A kubeconfig that is not YAML, or YAML of the wrong shape (a list, `clusters: 5`), fails inside the
    # client's loader with a parser error or a TypeError/AttributeError of its own: all mean "fix this file".
    except (ConfigException, OSError, yaml.YAMLError, TypeError, AttributeError, KeyError, ValueError) as error:
        source = f"kubeconfig {kubeconfig}" if kubeconfig is not None else "in-cluster service account"
        reason = " ".join(str(error).split()) or type(error).__name__  # YAML errors span lines; one line here
        if not isinstance(error, ConfigException | OSError | yaml.YAMLError):
            reason = f"not a kubeconfig (a YAML mapping with clusters, users and contexts): {reason}"
        fix = (
            "fix that file or pass another with --kubeconfig (env KUBECONFIG)" if kubeconfig is not None
            else "pass --kubeconfig <file> or --api-server <url>, or run inside a pod"
        )
        raise PermanentError(
            f"cannot load Kubernetes client configuration from the {source}: {reason}; {fix}"
        ) from error
    if api_server is not None:
        if urlparse(api_server).scheme not in ("http", "https"):
            raise PermanentError(f"--api-server {api_server!r} must be an http:// or https:// URL")
        configuration.host = api_server.rstrip("/")
    if urlparse(configuration.host).hostname in _LOOPBACK_HOSTS:
        configuration.proxy = None
    # TCP keepalive with client-go's timings: a watch through a NAT or proxy that silently dropped the
    # connection is noticed by the kernel instead of waiting out the read timeout.
    configuration.keep_alive = True
    # No hidden urllib3 retries: they would repeat a timed-out read up to 3 more times per call.
    # classify.call_with_retries is the one retry layer (logged, on the clock, bounded attempts).
    configuration.retries = False
    return ApiClient(configuration)


def lazy_custom_objects(api_client: ApiClient) -> Callable[[], CustomObjectsApi]:
    """`api_client`'s CustomObjectsApi, built (and its module and models imported) at the first call:
    an idle agent reads no custom object (ResourceSlices and the ClusterPolicy are read only before a
    change), so it never loads them."""

    @cache
    def build() -> CustomObjectsApi:
        from kubernetes.client import CustomObjectsApi  # noqa: PLC0415

        return CustomObjectsApi(api_client)

    return build
