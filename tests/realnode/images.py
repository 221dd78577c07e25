"""The node's local images, written as OCI archives and imported into its containerd (no registry here).

- `localhost/pause:1`: the sandbox image, scripts/real_node.sh's static pause program;
- `localhost/workload:1`: busybox (Debian's busybox-static, linked by scripts/real_node.sh), what the GPU
  workloads run;
- `localhost/nvidia-device-plugin:<version>`: the agent's image with NVIDIA's device plugin binary from
  scripts/nvidia_tools.sh added as one layer (its libc and, for the simulated driver, the libraries
  a Python interpreter links: Debian's, as on the host);
- the agent's image itself, the archive scripts/build_image.sh wrote, imported as it ships.

An archive written here names its image in `io.containerd.image.name`; one from umoci only carries
`org.opencontainers.image.ref.name`, so it is imported with `--base-name localhost/<name>`.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.realnode.node import RealNode

JsonDict = dict[str, Any]
LAYER = "application/vnd.oci.image.layer.v1.tar"


class Layout:
    """An OCI image layout being written into a tar archive, blob by blob."""

    def __init__(self, archive: tarfile.TarFile) -> None:
        self.archive = archive
        self.written: set[str] = set()

    def blob(self, data: bytes) -> JsonDict:
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        if digest not in self.written:
            self.written.add(digest)
            _add(self.archive, f"blobs/sha256/{digest[7:]}", data)
        return {"digest": digest, "size": len(data)}

    def finish(self, name: str, config: JsonDict, layers: list[JsonDict]) -> None:
        config_ref = {"mediaType": "application/vnd.oci.image.config.v1+json", **self.blob(_json(config))}
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": config_ref, "layers": layers}  # fmt: skip
        annotations = {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}
        entry = {"mediaType": manifest["mediaType"], **self.blob(_json(manifest)), "annotations": annotations}
        index = {"schemaVersion": 2, "manifests": [entry]}
        _add(self.archive, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _add(self.archive, "index.json", _json(index))


def layer(files: Iterable[tuple[str, Path | str]]) -> bytes:
    """A layer tar: (path in the image, a host file to copy, or a symlink target as str)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, source in files:
            if isinstance(source, Path):
                info = tar.gettarinfo(str(source.resolve()), arcname=name)  # a symlink's target
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with source.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                info = tarfile.TarInfo(name)
                info.type = tarfile.SYMTYPE
                info.linkname = source
                tar.addfile(info)
    return buffer.getvalue()


def write_image(path: Path, name: str, files: list[tuple[str, Path | str]], *, entrypoint: list[str]) -> Path:
    data = layer(files)
    with tarfile.open(path, "w") as archive:
        out = Layout(archive)
        config = {"architecture": "amd64", "os": "linux", "config": {"Entrypoint": entrypoint},
                  "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(data).hexdigest()}"]}}  # fmt: skip
        out.finish(name, config, [{"mediaType": LAYER, **out.blob(data)}])
    return path


def extend_image(base: Path, path: Path, name: str, files: list[tuple[str, Path | str]]) -> Path:
    """`base` (an OCI archive of one image) with one more layer holding `files`."""
    with tarfile.open(base) as source, tarfile.open(path, "w") as archive:
        def read(member: str) -> bytes:
            return _member(source, member)

        index = json.loads(read("index.json"))
        manifest = json.loads(read(f"blobs/sha256/{index['manifests'][0]['digest'][7:]}"))
        config = json.loads(read(f"blobs/sha256/{manifest['config']['digest'][7:]}"))
        out = Layout(archive)
        layers = []
        for old in manifest["layers"]:
            out.blob(read(f"blobs/sha256/{old['digest'][7:]}"))
            layers.append(old)
        data = layer(files)
        layers.append({"mediaType": LAYER, **out.blob(data)})
        config["rootfs"]["diff_ids"].append(f"sha256:{hashlib.sha256(data).hexdigest()}")
        config["config"].pop("Entrypoint", None)
        config["config"].pop("Cmd", None)
        out.finish(name, config, layers)
    return path


def agent_image_name(archive: Path) -> str:
    """`localhost/migagent:<tag>`, the tag being the archive's ref name (build_image.sh's TAG)."""
    with tarfile.open(archive) as source:
        index = json.loads(_member(source, "index.json"))
    return f"localhost/migagent:{index['manifests'][0]['annotations']['org.opencontainers.image.ref.name']}"


def import_images(node: RealNode, agent_archive: Path, device_plugin: Path, plugin_tag: str) -> dict[str, str]:
    """Every image the tests run, imported into the node's containerd; image role -> reference."""
    names = {
        "pause": "localhost/pause:1",
        "workload": "localhost/workload:1",
        "device-plugin": f"localhost/nvidia-device-plugin:{plugin_tag}",
        "agent": agent_image_name(agent_archive),
    }
    with tempfile.TemporaryDirectory(prefix="migagent-images-") as scratch:
        work = Path(scratch)
        archives = [
            write_image(work / "pause.tar", names["pause"], [("pause", node.bin_dir / "pause")], entrypoint=["/pause"]),
            write_image(work / "workload.tar", names["workload"],
                        [("bin/busybox", node.bin_dir / "busybox"), ("bin/sh", "busybox"), ("bin/sleep", "busybox")],
                        entrypoint=["/bin/sh"]),
            extend_image(agent_archive, work / "plugin.tar", names["device-plugin"],
                         [("usr/bin/nvidia-device-plugin", device_plugin)]),
        ]
        for archive in archives:
            node.ctr("images", "import", str(archive))
        node.ctr("images", "import", "--base-name", "localhost/migagent", str(agent_archive))
    return names


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def _member(archive: tarfile.TarFile, name: str) -> bytes:
    """A file of an archive written with or without a leading `./` (umoci's layout is tarred from `.`)."""
    for candidate in (name, f"./{name}"):
        try:
            handle = archive.extractfile(candidate)
        except KeyError:
            continue
        if handle is not None:
            return handle.read()
    raise KeyError(f"{name} is not in the image archive")
