"""Generation engines as Ray actors: each `EngineHost` actor runs an engine from the engine
registry (hf, or vLLM on a GPU) on a copy of the model the driver sent it, and
`RayEngines` is the trainer's engine in front of them.

Nothing needs a shared filesystem: the model's files, the trained weights and LoRA adapters
all travel through Ray's object store. A sync puts the full weights there once and every
actor loads them (an adapter travels as its files, a few MB).

An actor that dies is restarted by Ray from the model's first weights; each request carries
the number of the weights it must be made with, so a restarted actor (or one that missed a
sync) refuses it, is sent the current weights and adapters, and the request is made again.
A request whose actor died is made again on another: generation is a pure function of the
prompt, the weights and the seed, so no episode is lost to a lost engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import torch

from toolgym.agents.engines import make_engine
from toolgym.agents.engines.base import Capabilities, Completion, EngineError, SamplingParams
from toolgym.agents.ray.actor_load import ActorLoad
from toolgym.agents.ray.cluster import close_actors, connect, import_ray, restartable
from toolgym.errors import ConfigError, one_line

Files = dict[str, bytes]
"""A folder's files by relative path."""


def read_folder(folder: Path) -> Files:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def write_folder(files: Files, folder: Path) -> Path:
    for name, data in files.items():
        path = folder / name
        if not path.resolve().is_relative_to(folder.resolve()):
            raise ValueError(f"{name!r} would be written outside {folder}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


class EngineHost:
    """One engine in an actor process, on the model files it was sent."""

    def __init__(self, kind: str, model_files: Files, seed: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="toolgym-engine-"))
        model = write_folder(model_files, self.folder / "model")
        self.engine: Any = make_engine(kind, model=str(model), seed=seed)
        self.weights = 0
        """The number of the weights it holds (0: the model's own)."""
        self.adapters: set[str] = set()

    async def generate(
        self, weights: int, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None
    ) -> Completion | None:
        """The completion, or None when it holds other weights than number `weights`."""
        if weights != self.weights:
            return None
        completion: Completion = await self.engine.generate(prompt_ids, sampling, adapter)
        return completion

    async def take(
        self, weights: int, state_dict: dict[str, torch.Tensor] | None, adapters: dict[str, Files]
    ) -> None:
        """Hold weights number `weights`: load `state_dict` (None: the ones it has are
        those), and serve exactly the adapters named in `adapters`."""
        if state_dict is not None:
            await self.engine.update_weights(state_dict)
        for name in sorted(self.adapters - set(adapters)):
            await self.engine.unload_adapter(name)
            self.adapters.discard(name)
        for name in sorted(set(adapters) - self.adapters):
            folder = write_folder(adapters[name], self.folder / "adapters" / name)
            await self.engine.load_adapter(name, str(folder))
            self.adapters.add(name)
        self.weights = weights

    def ready(self) -> bool:
        return True

    def holds(self) -> int:
        return self.weights

    async def close(self) -> None:
        await self.engine.aclose()
        shutil.rmtree(self.folder, ignore_errors=True)


class RayEngines:
    """The trainer's engine: requests go to the least busy of `actors` engine actors of the
    registry's `kind`, each reserving `cpus` CPUs and `gpus` GPUs (a fraction shares one)."""

    capabilities: ClassVar[Capabilities] = Capabilities("full", full_weights=True, adapters=True)
    """It takes the trained weights whole (full runs) or as adapters (LoRA runs)."""

    def __init__(
        self, model: str | Path, *, kind: str = "hf", actors: int = 1, cpus: float = 1.0,
        gpus: float = 0.0, seed: int = 0, address: str = "local", timeout_s: float = 600.0,
    ) -> None:  # fmt: skip
        """`timeout_s`: the longest a request, a sync or an actor's start may take before it
        counts as lost (a stuck actor fails the run with its name instead of hanging it)."""
        ray = connect(address)
        self.timeout_s = timeout_s
        self._files = ray.put(read_folder(Path(model)))
        """Kept while the actors live: Ray restarts one from these."""
        host = restartable(EngineHost, cpus, gpus)
        self.hosts = [host.remote(kind, self._files, seed + i) for i in range(actors)]
        self.usage = ActorLoad(actors, "engine", "tokens")
        self.weights = 0
        """The number of the current weights, which every request names."""
        self._state: Any = None
        """The object-store copy of the last weights sent (None: the model's own)."""
        self._adapters: dict[str, Files] = {}
        self._restoring = [asyncio.Lock() for _ in self.hosts]
        self.restored = 0
        """Times an actor was sent the current weights after missing them (a restart)."""
        try:
            ray.get([h.ready.remote() for h in self.hosts], timeout=timeout_s)
        except Exception as exc:
            raise ConfigError(
                f"engine actors ({kind}) did not start: {one_line(exc, 400)}"
            ) from None

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None = None
    ) -> Completion:
        """Made on the least busy actor; on another if that one is lost, and again on one
        that had to be sent the current weights first."""
        lost: dict[int, str] = {}
        for _ in range(2 * len(self.hosts) + 1):
            host = self.usage.least_loaded(avoid=lost)
            asked = self.weights
            self.usage.start(host)
            try:
                done = await self._call(
                    self.hosts[host].generate, asked, prompt_ids, sampling, adapter
                )
            except _Lost as exc:
                lost[host] = f"engine actor {host}: {exc}"
                continue
            finally:
                self.usage.end(host)
            if done is None:  # it holds other weights: newer ones (a sync came between), or
                if asked == self.weights:  # older (restarted): send it the current ones
                    await self._restore(host)
                continue
            self.usage.count(host, len(done.token_ids))
            return done
        raise EngineError(f"no engine actor could make the completion ({'; '.join(lost.values())})")

    async def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Every actor loads `state_dict` (sent once through the object store)."""
        ray = import_ray()
        cpu = {name: tensor.detach().to("cpu") for name, tensor in state_dict.items()}
        self._state = ray.put(cpu)
        await self._send(self._state)

    async def load_adapter(self, name: str, path: str) -> None:
        """Every actor serves the adapter in the driver's folder `path` as `name`."""
        self._adapters[name] = read_folder(Path(path))
        await self._send(None)

    async def unload_adapter(self, name: str) -> None:
        self._adapters.pop(name, None)
        await self._send(None)

    def actor_metrics(self) -> dict[str, float]:
        """Each actor's tokens/s, most requests held at once and idle share, and restores."""
        return self.usage.window() | {"ray/engine/restored": float(self.restored)}

    async def aclose(self) -> None:
        await close_actors(self.hosts, self.timeout_s)

    # ----- the actors ------------------------------------------------------------------------
    async def _send(self, state: Any) -> None:
        """Weights number `weights + 1` to every actor; one that cannot take them now is
        sent them when a request finds it behind."""
        self.weights += 1
        sends = [self._call(h.take, self.weights, state, self._adapters) for h in self.hosts]
        for outcome in await asyncio.gather(*sends, return_exceptions=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, _Lost):
                raise outcome  # the weights or an adapter do not load: the run must hear it

    async def _restore(self, host: int) -> None:
        """Send actor `host` the current weights and adapters, once however many requests
        found it behind."""
        with contextlib.suppress(_Lost):  # lost again: the next request there finds it behind
            async with self._restoring[host]:
                if await self._call(self.hosts[host].holds) == self.weights:
                    return  # a request before this one restored it
                self.restored += 1
                await self._call(self.hosts[host].take, self.weights, self._state, self._adapters)

    async def _call(self, method: Any, *args: Any) -> Any:
        """`method.remote(*args)`, with a lost actor or a timeout raised as `_Lost`."""
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        try:
            return await asyncio.wait_for(method.remote(*args), self.timeout_s)
        except (ActorDiedError, ActorUnavailableError, RayActorError) as exc:
            raise _Lost(one_line(exc, 200)) from None
        except TimeoutError:
            raise _Lost(f"no answer in {self.timeout_s:g} s") from None


class _Lost(Exception):
    """An actor died, is restarting or did not answer in time."""
