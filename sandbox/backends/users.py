"""Host users for sandboxes: one of its own for each live sandbox.

RLIMIT_NPROC bounds the processes of a host user, counted across the host. Were every
sandbox `nobody`, code that holds its sandbox at the process limit would stop every other
sandbox of that user from starting a process (Docker's containers share the host's users;
so do bubblewrap's on kernels that count a user's processes outside its namespaces). Each
sandbox instead runs as a user no account has, from a block this process owns (its pid picks
the block, so two live processes never draw the same user), handed back once the sandbox is
gone.
"""

from __future__ import annotations

import os

from toolgym.log import get_logger

log = get_logger(__name__)

FIRST = 1_000_000_000
"""The first user of the range: far above the accounts and the ranges of subordinate ids
that distributions hand out (100000 + 65536 per user)."""
BLOCK = 256
"""Users per process: a process with more live sandboxes shares them, two to a user."""
PID_BLOCKS = 1 << 22
"""Linux's largest pid_max: the blocks of live processes never overlap. The last user is
FIRST + PID_BLOCKS * BLOCK - 1, below 2**31."""


class SandboxUser:
    """One sandbox's hold on a host user; `release` hands it back (once, however often it is
    called: a sandbox's clean-up can run on more than one path)."""

    def __init__(self, users: SandboxUsers, uid: int) -> None:
        self.users, self.uid = users, uid
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.users.give_back(self.uid)


class SandboxUsers:
    """Draws a user for each sandbox this process opens and takes it back when it closes."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}  # uid -> sandboxes running as it
        self.turn = 0
        self.warned = False

    def acquire(self) -> SandboxUser:
        base = FIRST + (os.getpid() % PID_BLOCKS) * BLOCK
        start, self.turn = self.turn, self.turn + 1
        uids = [base + (start + k) % BLOCK for k in range(BLOCK)]
        uid = next((u for u in uids if u not in self.live), None)
        if uid is None:  # every user of the block is live: share the least shared
            uid = min(uids, key=lambda u: self.live[u])
            if not self.warned:
                self.warned = True
                log.warning(
                    "more than %d sandboxes are open in this process: some share a host user, "
                    "and so their process limit",
                    BLOCK,
                )
        self.live[uid] = self.live.get(uid, 0) + 1
        return SandboxUser(self, uid)

    def give_back(self, uid: int) -> None:
        left = self.live.get(uid, 0) - 1
        if left > 0:
            self.live[uid] = left
        else:
            self.live.pop(uid, None)


USERS = SandboxUsers()
