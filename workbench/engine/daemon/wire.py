"""The daemon's messages and its socket (docs/engine.md, "Warm daemon"). Torch-free.

Each message is one JSON array `[PROTOCOL, kind, payload]` in a length-prefixed frame (4 bytes,
big-endian) over a Unix socket; nothing received is ever unpickled. Payloads are plain JSON
plus a few tagged forms (`to_json`/`from_json`): tuples, Paths, mappings with non-string keys,
and dataclasses of workbench's own modules (the session, RunOptions, events), rebuilt by calling
the class with its fields, so a message can name no other code to run.

    client -> daemon   first message: RUN RunRequest | STATUS None | STOP None
                       then, during a run: CANCEL None
    daemon -> client   RUN:    ACCEPTED info, then EVENT Event ..., then DOC [document, info] | ERROR text
                               or BUSY info (one run at a time) | REFUSED text (another fingerprint)
                       STATUS: INFO info          STOP: INFO info (then it exits)

`info` is the daemon's status dict (engine/daemon.py `Daemon.info`). Before any message both
ends check the other's uid (SO_PEERCRED: the same user only) and prove the authkey to each other
(multiprocessing.connection's HMAC challenge, both ways), each step under a timeout.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import json
import os
import select
import socket
import struct
import types
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Mapping

PROTOCOL = 2
MAX_MESSAGE_BYTES = 512 * 1024 * 1024  # a document with PTX texts is large; anything past this is not ours
HANDSHAKE_S = 5.0  # peer check, authkey challenge both ways, and the first message


class Kind(str, enum.Enum):
    run = "run"
    status = "status"
    stop = "stop"
    cancel = "cancel"
    accepted = "accepted"
    busy = "busy"
    refused = "refused"
    event = "event"
    doc = "doc"
    error = "error"
    info = "info"


class WireError(Exception):
    """A message that is not `[PROTOCOL, kind, payload]` with a known kind (another workbench
    version on the other end, or not a daemon at all), or a payload that cannot travel."""


@dataclass(frozen=True)
class RunRequest:
    """One replay's engine part: the session (plugins resolved), its RunOptions, the client's
    working folder and fingerprint (engine/daemon_paths.py)."""

    session: Any
    options: Any
    cwd: str
    fingerprint: dict


# -- JSON with a few tagged forms --------------------------------------------------------------
TAGS = ("__dc__", "__t__", "__m__", "__mp__", "__p__", "__b__", "__fs__")


def to_json(value: Any) -> Any:
    """`value` as JSON data (module docstring). Raises WireError for anything else (a function,
    an object of another package)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if not cls.__module__.startswith("workbench."):
            raise WireError(f"cannot send a {cls.__module__}.{cls.__qualname__} to the daemon")
        return {"__dc__": f"{cls.__module__}:{cls.__qualname__}",
                "f": {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}}
    if isinstance(value, tuple):
        return {"__t__": [to_json(v) for v in value]}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        if type(value) is dict and all(isinstance(k, str) and k not in TAGS for k in value):
            return {k: to_json(v) for k, v in value.items()}
        return {"__mp__" if isinstance(value, types.MappingProxyType) else "__m__":
                [[to_json(k), to_json(v)] for k, v in value.items()]}
    if isinstance(value, PurePath):
        return {"__p__": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"__b__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, frozenset):
        return {"__fs__": [to_json(v) for v in value]}
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar in a record
        return to_json(value.item())
    raise WireError(f"cannot send a {type(value).__module__}.{type(value).__qualname__} to the daemon")


def from_json(data: Any) -> Any:
    """The inverse of `to_json`. A dataclass is rebuilt only from a workbench module's dataclass
    (its class called with the fields); raises WireError for any other name."""
    if isinstance(data, list):
        return [from_json(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "__t__" in data:
        return tuple(from_json(v) for v in data["__t__"])
    if "__m__" in data:
        return {from_json(k): from_json(v) for k, v in data["__m__"]}
    if "__mp__" in data:
        return types.MappingProxyType({from_json(k): from_json(v) for k, v in data["__mp__"]})
    if "__p__" in data:
        from pathlib import Path

        return Path(data["__p__"])
    if "__b__" in data:
        return base64.b64decode(data["__b__"])
    if "__fs__" in data:
        return frozenset(from_json(v) for v in data["__fs__"])
    if "__dc__" in data:
        return _dataclass(str(data["__dc__"]))(**{k: from_json(v) for k, v in data["f"].items()})
    return {k: from_json(v) for k, v in data.items()}


def _dataclass(name: str) -> type:
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith("workbench.") or not qualname:
        raise WireError(f"the daemon's messages carry workbench's dataclasses only, not {name!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise WireError(f"no dataclass {name!r} in this workbench") from None
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise WireError(f"{name!r} is not a dataclass")
    return obj


def send(conn: Any, kind: Kind, payload: Any = None) -> None:
    """Send one message; raises OSError/ValueError when the other end has gone, WireError for a
    payload that cannot travel."""
    conn.send_bytes(json.dumps([PROTOCOL, Kind(kind).value, to_json(payload)]).encode())


def recv(conn: Any, timeout: float | None = None) -> tuple[Kind, Any]:
    """Receive one message as (kind, payload); raises EOFError when the other end closed,
    TimeoutError after `timeout` seconds (a Channel only), WireError for anything but a message
    of this protocol."""
    raw = conn.recv_bytes(timeout=timeout) if isinstance(conn, Channel) else conn.recv_bytes()
    try:
        message = json.loads(raw)
    except ValueError:
        raise WireError("not a daemon message (not JSON)") from None
    if not (isinstance(message, list) and len(message) == 3):
        raise WireError(f"not a daemon message: {type(message).__name__}")
    protocol, kind, payload = message
    if protocol != PROTOCOL:
        raise WireError(f"daemon protocol {protocol!r}, this workbench speaks {PROTOCOL}")
    try:
        kind = Kind(kind)
    except ValueError:
        raise WireError(f"unknown daemon message kind {kind!r}") from None
    return kind, from_json(payload)


# -- the socket ------------------------------------------------------------------------------
def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket, from the
    kernel (SO_PEERCRED, Linux)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)


class Channel:
    """One connected Unix socket with length-prefixed frames and a timeout on every wait
    (send_bytes/recv_bytes as multiprocessing's Connection, so its HMAC challenge runs on it).
    peer_pid/peer_uid: the other end's process, from the kernel."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.peer_pid, self.peer_uid, _gid = peer_credentials(sock)
        self.default_timeout: float | None = HANDSHAKE_S

    def fileno(self) -> int:
        return self.sock.fileno()

    def send_bytes(self, data: bytes) -> None:
        self.sock.settimeout(None)
        self.sock.sendall(struct.pack("!I", len(data)) + data)

    def recv_bytes(self, maxlength: int | None = None, timeout: float | None = -1.0) -> bytes:
        """One frame; EOFError at the end, TimeoutError when none comes within `timeout` (-1: the
        channel's default_timeout; None: wait), OSError for one over maxlength."""
        self.sock.settimeout(self.default_timeout if timeout == -1.0 else timeout)
        (size,) = struct.unpack("!I", self._exactly(4))
        if size > (maxlength or MAX_MESSAGE_BYTES):
            raise OSError(f"a daemon message of {size} bytes, over the limit")
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise EOFError("the other end closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def poll(self, timeout: float) -> bool:
        return bool(select.select([self.sock], [], [], timeout)[0])

    def shutdown(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()


def authenticate(channel: Channel, key: bytes, *, server: bool) -> None:
    """The mutual HMAC challenge (multiprocessing.connection's), under the channel's timeout;
    raises multiprocessing.AuthenticationError, EOFError or OSError (TimeoutError included)."""
    from multiprocessing.connection import answer_challenge, deliver_challenge

    # a Channel has what the handshake uses of a Connection (send_bytes, recv_bytes): duck-typed
    if server:
        deliver_challenge(channel, key)  # type: ignore[arg-type]
        answer_challenge(channel, key)  # type: ignore[arg-type]
    else:
        answer_challenge(channel, key)  # type: ignore[arg-type]
        deliver_challenge(channel, key)  # type: ignore[arg-type]


def connect_socket(path: str, timeout: float = HANDSHAKE_S) -> socket.socket:
    """A socket connected to `path` (connect under `timeout`)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def same_user(channel: Channel) -> bool:
    return channel.peer_uid == os.getuid()
