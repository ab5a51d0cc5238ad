"""local: NO isolation. The code runs as this user on this machine, with rlimits and a private
temp dir only: it can read your files and reach the network. For trusted code, debugging, or
machines where nothing else runs; never chosen unless asked for by name, and loud about it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from typing import Any

from toolgym.log import get_logger
from toolgym.sandbox.backends.base import START_TIMEOUT_S, Backend, Mode
from toolgym.sandbox.channel import Channel, process_channel
from toolgym.sandbox.result import Limits

log = get_logger(__name__)
WARNING = (
    "sandbox backend 'local' runs model-written code UNISOLATED on this machine (your files, "
    "your network); use it only for trusted code. Use 'bubblewrap' or 'docker' otherwise."
)


class LocalBackend(Backend):
    name = "local"
    isolated = False

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        log.warning(WARNING)

    async def open(self, mode: Mode, limits: Limits) -> Channel:
        root = tempfile.mkdtemp(prefix="toolgym-local-sandbox-")
        env = {
            "TOOLGYM_WORK": f"{root}/work",
            "TOOLGYM_TMP": f"{root}/tmp",
            "PATH": "/usr/bin:/bin",
        }
        if mode == "repl":
            env["TOOLGYM_LIMITS"] = json.dumps(self.guest_limits(limits))
        return await process_channel(
            self.guest_argv(self.python, mode),
            START_TIMEOUT_S,
            cleanup=lambda: shutil.rmtree(root, ignore_errors=True),
            env=env,
            cwd=root,
            start_new_session=True,
        )

    def guest_limits(self, limits: Limits) -> dict[str, Any]:
        # RLIMIT_NPROC would count every process this user has on the machine.
        return {**limits.guest(), "processes": None}
