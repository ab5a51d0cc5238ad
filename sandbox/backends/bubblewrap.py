"""bubblewrap: each sandbox is a `bwrap` process with every namespace unshared (user, pid,
network, ipc, uts, cgroup, mount) and no further user namespace allowed inside (so code
cannot gain the capabilities to mount anything), the host's runtime (/usr and its links)
read-only, a tmpfs work dir, /tmp and /dev/shm of bounded size (emptied after every call), a
read-only /dev, nothing else of the host (no home, no /tmp, no project files, no /etc but the
linker cache; the root itself read-only), all capabilities dropped, a new terminal session,
and death with its parent. The guest runs as pid 1 of its namespace, so code cannot signal it.

What it does not bound: memory is limited per process (RLIMIT_AS, times the process limit),
not for the sandbox as a whole; the Docker backend's cgroup bounds the total.

Started by root, bwrap itself runs as a host user of its own (users.py), never root: the
kernel does not count processes against RLIMIT_NPROC for a namespace that maps to host root,
so a fork bomb would go unbounded, and a user shared by every sandbox would let one at its
process limit hold back the others on kernels that count a user's processes across the host.
`setpriv` (util-linux) drops the ids in the process it then turns into bwrap, so Python starts
it with vfork; dropping them in Python (`user=`) makes it fork, which copies the page tables of
a process holding a model: 27 ms a sandbox against 3 ms. Without setpriv, Python drops them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from toolgym.sandbox.backends.base import START_TIMEOUT_S, Backend, Mode
from toolgym.sandbox.backends.users import USERS
from toolgym.sandbox.channel import Channel, process_channel
from toolgym.sandbox.result import Limits, SandboxError

RUNTIME_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
RUNTIME_FILES = ("/etc/ld.so.cache", "/etc/alternatives")
NOBODY = 65534
INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install bubblewrap)"


class BubblewrapBackend(Backend):
    """Args:
    python: the interpreter inside (default /usr/bin/python3, the system's); one outside
        /usr gets its installation prefix bound read-only too.
    bwrap: the bubblewrap binary.
    """

    name = "bubblewrap"

    def __init__(self, python: str | None = None, bwrap: str = "bwrap") -> None:
        self.python = python or _default_python()
        self.bwrap = shutil.which(bwrap) or bwrap
        self.setpriv = shutil.which("setpriv")

    def check(self) -> None:
        if not Path(self.bwrap).is_file():
            raise SandboxError(f"the bubblewrap sandbox needs `bwrap`, not found: {INSTALL_HINT}")
        if not Path(self.python).is_file():
            raise SandboxError(f"the sandbox's interpreter {self.python} does not exist")
        drop, popen = self._as_user(NOBODY)
        probe = subprocess.run(
            [*drop, *self.argv(Limits(), "probe"), self.python, "-I", "-c", "pass"],
            capture_output=True,
            timeout=30,
            **popen,
        )
        if probe.returncode != 0:
            why = probe.stderr.decode("utf-8", "replace").strip()[-500:]
            raise SandboxError(
                f"bubblewrap cannot start a sandbox here ({why or 'exit ' + str(probe.returncode)}); "
                "it needs bubblewrap 0.8 or newer (for --disable-userns) and unprivileged user "
                "namespaces (sysctl kernel.unprivileged_userns_clone=1 or a kernel that allows them)"
            )

    async def open(self, mode: Mode, limits: Limits) -> Channel:
        user = USERS.acquire()
        drop, popen = self._as_user(user.uid)
        argv = [*drop, *self.argv(limits, mode), *self.guest_argv(self.python, mode)]
        return await process_channel(argv, START_TIMEOUT_S, cleanup=user.release, **popen)

    def argv(self, limits: Limits, mode: str) -> list[str]:
        size = str(limits.work_mb << 20)
        args = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
        args += ["--die-with-parent", "--new-session", "--as-pid-1"]
        args += ["--cap-drop", "ALL", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        args += ["--hostname", "sandbox", "--clearenv", "--setenv", "TOOLGYM_WORK", "/work"]
        args += ["--setenv", "TOOLGYM_SHM", "/dev/shm"]
        if mode == "repl":
            args += ["--setenv", "TOOLGYM_LIMITS", json.dumps(self.guest_limits(limits))]
        for path in RUNTIME_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path in RUNTIME_FILES:
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
        prefix = Path(os.path.realpath(self.python)).parent.parent
        if not str(prefix).startswith("/usr"):
            args += ["--ro-bind", str(prefix), str(prefix)]
        args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/dev"]
        args += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/work"]
        return [*args, "--remount-ro", "/", "--chdir", "/work"]

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "python": self.python}

    def _as_user(self, uid: int) -> tuple[list[str], dict[str, Any]]:
        """What starts bwrap as host user `uid` when we are root: a setpriv prefix to the
        command, or else Popen's arguments that drop the ids."""
        if os.geteuid() != 0:
            return [], {}
        if self.setpriv is not None:
            ids = ["--reuid", str(uid), "--regid", str(uid), "--clear-groups"]
            return [self.setpriv, *ids], {}
        return [], {"user": uid, "group": uid, "extra_groups": []}


def _default_python() -> str:
    return "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else "python3"
