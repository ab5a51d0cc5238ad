"""Builds the Docker backend's image on this machine, with no image registry: a minimal
Debian root file system made by debootstrap (Python 3 and bash) put in with `docker import`.
Where a registry is reachable, `base=` builds `FROM` that image instead.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from toolgym.log import get_logger
from toolgym.sandbox.backends.docker import DEFAULT_IMAGE
from toolgym.sandbox.result import SandboxError

log = get_logger(__name__)
PACKAGES = ("python3", "python3-minimal")
DROP = ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists")


def build_image(
    tag: str = DEFAULT_IMAGE,
    suite: str | None = None,
    mirror: str | None = None,
    base: str | None = None,
) -> str:
    """Build the sandbox image and return its id. Needs root and debootstrap (or `base`)."""
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:
        raise SandboxError(f"cannot reach the Docker engine ({exc}); start dockerd first") from exc
    try:
        if base is not None:
            return _from_base(client, tag, base)
        return _from_debootstrap(client, tag, suite or _host_suite(), mirror)
    finally:
        client.close()


def _from_debootstrap(client: Any, tag: str, suite: str, mirror: str | None) -> str:
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "building the image needs debootstrap (apt-get install debootstrap), or pass "
            "--base IMAGE where an image registry is reachable"
        )
    if os.geteuid() != 0:
        raise SandboxError("debootstrap needs root: run `toolgym sandbox build-image` as root")
    with tempfile.TemporaryDirectory(prefix="toolgym-image-") as tmp:
        root = Path(tmp) / "rootfs"
        argv = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite]
        argv += [str(root), *([mirror] if mirror else [])]
        log.info("building the sandbox root file system: %s", " ".join(argv))
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise SandboxError(f"debootstrap failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")
        for rel in DROP:
            shutil.rmtree(root / rel, ignore_errors=True)
        (root / "work").mkdir(exist_ok=True)
        (root / "work").chmod(0o1777)  # Docker gives a tmpfs the mode of the dir beneath it
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        shutil.rmtree(root)
        changes = ["USER 65534:65534", "WORKDIR /work", 'CMD ["python3"]']
        repository, version = _split(tag)
        out = client.api.import_image_from_file(
            str(archive), repository=repository, tag=version, changes=changes
        )
    log.info("imported: %s", str(out).strip()[-200:])
    return str(client.images.get(tag).id)


def _from_base(client: Any, tag: str, base: str) -> str:
    dockerfile = (
        f"FROM {base}\n"
        "RUN python3 -c 'import sys; assert sys.version_info >= (3, 9)' && mkdir -p /work\n"
        "USER 65534:65534\nWORKDIR /work\n"
    )
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return str(image.id)


def _host_suite() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME=") and line.split("=", 1)[1].strip():
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "bookworm"


def _split(tag: str) -> tuple[str, str]:
    """("name", "version") of "name:version" (a registry's host:port stays in the name)."""
    name, _, version = tag.rpartition(":")
    if not name or "/" in version:
        return tag, "latest"
    return name, version
