"""One OpenEnv WebSocket session of a served toolgym env: its messages (reset, step, state,
close) answered in openenv-core's own response types.

Whatever a client sends is answered, and the session goes on: a frame that is not JSON, not
an object, not valid Unicode or nested too deep, a message of an unknown type or the wrong
shape, a step before a reset or after the end, a task the server does not take. Each gets
an error message in OpenEnv's shape (`{"type": "error", "data": {"message", "code"}}`),
never a traceback. A session over the server's cap is refused in words and closed; one the
idle rule ends is told why, then closed.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import (
    State,
    WSErrorCode,
    WSObservationResponse,
    WSResetMessage,
    WSStateResponse,
    WSStepMessage,
)
from pydantic import BaseModel, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from toolgym.envs.openenv.wire import TurnAction, TurnObservation
from toolgym.envs.serving import CapacityError, EnvHost, Session, SessionEnded
from toolgym.errors import ToolgymError, one_line
from toolgym.log import get_logger
from toolgym.tools.text import nesting
from toolgym.tools.tool import InfraError

log = get_logger(__name__)

MAX_NESTING = 64
"""The deepest a message's JSON may nest (a turn and a task are shallow)."""
RESET_FIELDS = ("seed", "split", "task", "episode_id")


class ClientError(ToolgymError, ValueError):
    """What the client sent cannot be used; the message says why."""

    def __init__(self, message: str, code: WSErrorCode = WSErrorCode.VALIDATION_ERROR) -> None:
        super().__init__(message)
        self.code = code


async def serve_socket(websocket: WebSocket, host: EnvHost) -> None:
    """Run one client's session until it closes, ends, or idles out."""
    await websocket.accept()
    key = uuid.uuid4().hex

    async def expire(reason: str) -> None:
        await _send(websocket, _error(f"this session ended: {reason}", WSErrorCode.SESSION_ERROR))
        await websocket.close(code=1000, reason=reason[:120])

    try:
        await host.open(key, expire)
    except CapacityError as exc:
        await _send(websocket, _error(str(exc), WSErrorCode.CAPACITY_REACHED))
        await _close(websocket)
        return
    except Exception as exc:  # the env could not be built: the operator's to fix
        log.warning("a session's env could not be built: %s", one_line(exc))
        await _send(websocket, _error(f"the env could not be built: {one_line(exc)}",
                                      WSErrorCode.FACTORY_ERROR))  # fmt: skip
        await _close(websocket)
        return
    episode = _Episode()
    try:
        while True:
            frame = await websocket.receive()
            if frame["type"] == "websocket.disconnect":
                return
            reply: BaseModel | dict[str, Any] | None
            try:
                reply = await _answer(host, key, episode, _read(frame))
            except ClientError as exc:
                reply = _error(str(exc), exc.code)
            if reply is None:  # the client closed the session
                return
            await _send(websocket, reply)
    except (WebSocketDisconnect, RuntimeError):  # the socket went away (or was expired)
        return
    finally:
        await host.close(key, "its client closed it")
        await _close(websocket)


class _Episode:
    """What OpenEnv's `state` reports of the session's current episode."""

    def __init__(self) -> None:
        self.state = State(episode_id=None, step_count=0)


def _read(frame: Mapping[str, Any]) -> dict[str, Any]:
    """The frame as a message object, or a ClientError saying what is wrong with it."""
    raw = frame.get("text")
    if raw is None:
        try:
            raw = (frame.get("bytes") or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise ClientError("the frame is not UTF-8 text", WSErrorCode.INVALID_JSON) from None
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ClientError(f"Invalid JSON: {one_line(exc, 200)}", WSErrorCode.INVALID_JSON) from None
    if not isinstance(message, dict):
        raise ClientError(f'a message is a JSON object with a "type", got {type(message).__name__}')
    if nesting(message) > MAX_NESTING:
        raise ClientError(f"the message nests deeper than {MAX_NESTING} levels")
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ClientError("the message holds a lone surrogate: not valid Unicode") from None
    return message


async def _answer(
    host: EnvHost, key: str, episode: _Episode, message: dict[str, Any]
) -> BaseModel | None:
    """The reply to one message (None: close the session)."""
    try:
        session = host.get(key)
    except SessionEnded as exc:
        raise ClientError(str(exc), WSErrorCode.SESSION_ERROR) from None
    kind = message.get("type")
    try:
        if kind == "reset":
            return await _reset(host, session, episode, WSResetMessage.model_validate(message))
        if kind == "step":
            step = WSStepMessage.model_validate(message)
            return await _step(session, episode, TurnAction.model_validate(step.data))
        if kind == "state":
            return WSStateResponse(data=episode.state.model_dump())
        if kind == "close":
            return None
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        raise ClientError(f"Invalid message: {one_line(errors, 600)}") from None
    known = "reset, step, state, close"
    if kind == "mcp":
        raise ClientError(f"this server has no MCP tools (serve them with `toolgym serve mcp`); "
                          f"messages: {known}", WSErrorCode.UNKNOWN_TYPE)  # fmt: skip
    raise ClientError(f"Unknown message type {one_line(kind, 40)!r}; messages: {known}",
                      WSErrorCode.UNKNOWN_TYPE)  # fmt: skip


async def _reset(
    host: EnvHost, session: Session, episode: _Episode, message: WSResetMessage
) -> BaseModel:
    data = message.data
    unknown = sorted(str(k)[:40] for k in data if k not in RESET_FIELDS)
    if unknown:
        raise ClientError(f"reset takes {', '.join(RESET_FIELDS)}; got {', '.join(unknown)}")
    episode_id = data.get("episode_id")
    if episode_id is not None and not isinstance(episode_id, str | int):
        raise ClientError("episode_id is a string")
    async with session.lock:
        try:
            messages, info = await host.reset(
                session, data.get("seed"), data.get("split"), data.get("task")
            )
        except InfraError as exc:
            raise ClientError(f"the env could not start an episode: {one_line(exc)}",
                              WSErrorCode.EXECUTION_ERROR) from None  # fmt: skip
        except ToolgymError as exc:  # a seed, split or task the env refuses
            raise ClientError(one_line(exc, 1000), WSErrorCode.EXECUTION_ERROR) from None
        except Exception as exc:
            log.exception("a served env failed to reset")
            raise ClientError(f"the env failed: {one_line(exc)}",
                              WSErrorCode.EXECUTION_ERROR) from None  # fmt: skip
    episode.state = State(episode_id=str(episode_id or uuid.uuid4().hex), step_count=0)
    observation = TurnObservation(
        messages=messages, tools=list(info.get("tools") or []),
        state_key=str(info["state_key"]), reward=None, done=False,
    )  # fmt: skip
    return WSObservationResponse(data=serialize_observation(observation))


async def _step(session: Session, episode: _Episode, action: TurnAction) -> BaseModel:
    if session.episode_over:
        raise ClientError("step needs reset first: no episode is running (it ended, or never "
                          "started)", WSErrorCode.EXECUTION_ERROR)  # fmt: skip
    env = session.env
    assert env is not None  # a WebSocket session's env is built when it opens
    async with session.lock:
        try:
            messages, reward, terminated, truncated, info = await env.astep(action.message)
        except Exception as exc:
            session.episode_over = True
            log.exception("a served env failed a step")
            raise ClientError(f"the env failed the step: {one_line(exc)}; reset to go on",
                              WSErrorCode.EXECUTION_ERROR) from None  # fmt: skip
    episode.state.step_count += 1
    session.episode_over = bool(terminated or truncated)
    observation = TurnObservation(
        messages=messages, reward=float(reward), done=bool(terminated or truncated),
        truncated=bool(truncated and not terminated), valid_action=bool(info["valid_action"]),
        error=info.get("error"), infra_error=info.get("infra_error"),
        state_key=str(info["state_key"]),
    )  # fmt: skip
    return WSObservationResponse(data=serialize_observation(observation))


def _error(message: str, code: WSErrorCode) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code.value}}


async def _send(websocket: WebSocket, reply: BaseModel | dict[str, Any]) -> None:
    """One reply as JSON text; escapes keep it valid UTF-8 whatever an env wrote."""
    payload = reply.model_dump(mode="json") if isinstance(reply, BaseModel) else reply
    if websocket.application_state is WebSocketState.CONNECTED:
        await websocket.send_text(json.dumps(payload, ensure_ascii=True))


async def _close(websocket: WebSocket) -> None:
    if websocket.application_state is WebSocketState.CONNECTED:
        with contextlib.suppress(RuntimeError):  # already closing
            await websocket.close()
