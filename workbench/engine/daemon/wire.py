"""The daemon's messages (docs/engine.md, "Warm daemon"): each is one pickled tuple
`(PROTOCOL, kind, payload)` sent over a multiprocessing.connection (length-prefixed frames,
authkey handshake). Torch-free.

    client -> daemon   first message: RUN RunRequest | STATUS None | STOP None
                       then, during a run: CANCEL None
    daemon -> client   RUN:    ACCEPTED info, then EVENT Event ..., then DOC (document, info) | ERROR text
                               or BUSY info (one run at a time) | REFUSED text (another fingerprint)
                       STATUS: INFO info          STOP: INFO info (then it exits)

`info` is the daemon's status dict (engine/daemon.py `Daemon.info`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

PROTOCOL = 1


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
    """A message that is not `(PROTOCOL, kind, payload)` with a known kind (another workbench
    version on the other end, or not a daemon at all)."""


@dataclass(frozen=True)
class RunRequest:
    """One replay's engine part: the session (plugins resolved), its RunOptions, the client's
    working folder and fingerprint (engine/daemon_paths.py)."""

    session: Any
    options: Any
    cwd: str
    fingerprint: dict


def send(conn: Any, kind: Kind, payload: Any = None) -> None:
    """Send one message; raises OSError/ValueError when the other end has gone."""
    conn.send((PROTOCOL, Kind(kind).value, payload))


def recv(conn: Any) -> tuple[Kind, Any]:
    """Receive one message as (kind, payload); raises EOFError when the other end closed,
    WireError for anything but a message of this protocol."""
    message = conn.recv()
    if not (isinstance(message, tuple) and len(message) == 3):
        raise WireError(f"not a daemon message: {type(message).__name__}")
    protocol, kind, payload = message
    if protocol != PROTOCOL:
        raise WireError(f"daemon protocol {protocol!r}, this workbench speaks {PROTOCOL}")
    try:
        return Kind(kind), payload
    except ValueError:
        raise WireError(f"unknown daemon message kind {kind!r}") from None
