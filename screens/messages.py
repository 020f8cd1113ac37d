"""Every message of the app, in one place: small dataclasses, posted up (workers and widgets -> app).

Workers post from their threads (`post_message` is thread-safe); widgets post what the user did
and never reach into each other; the app updates the session and sets attributes down.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.message import Message

from workbench.events import Event
from workbench.session.model import Session

from .catalog import Catalog


# -- from workers ------------------------------------------------------------------------------
@dataclass
class Loaded(Message):
    """The startup worker found the ops and probed the machine (the session follows)."""

    catalog: Catalog


@dataclass
class LoadFailed(Message):
    error: str


@dataclass
class OpenFailed(Message):
    """A session chosen with ctrl+o or the palette could not be opened (the current one stays)."""

    error: str


@dataclass
class SessionOpened(Message):
    """A session file was read (ctrl+o, the palette), with its saved results if any."""

    session: Session
    path: Path | None
    results: dict | None = None
    notes: tuple[str, ...] = ()
    failed: str | None = None  # the file that could not be opened (the session is then empty)


@dataclass
class EngineEvent(Message):
    """One event of `workbench.events`, as the engine emitted it."""

    event: Event


class EngineEvents(Message):
    """Events waiting in the app's inbox (RunnerMixin._post_event): one message however many
    came since the last was handled, so a burst of them is one turn of the app's queue and a key
    pressed meanwhile waits behind one message, not behind each event's."""


@dataclass
class RunDone(Message):
    """run_plan returned its results document (cancelled: the stop flag was set)."""

    doc: dict
    run_index: int
    cancelled: bool = False


@dataclass
class RunCrashed(Message):
    """run_plan raised: one line for the notification, the traceback for the Log."""

    error: str
    details: str = ""


@dataclass
class FilesChanged(Message):
    """Watch mode (`workbench FILE --watch`): saved edits of the session or its plugin files."""

    paths: tuple[Path, ...]


@dataclass
class WatchReloaded(Message):
    """Watch mode: the plugins were imported afresh (and the session re-read); re-run now.
    files: what to watch from now on; index: the run on screen before the session was re-read."""

    files: tuple[Path, ...]
    index: int | None = None


@dataclass
class WatchFailed(Message):
    """Watch mode: the session or a plugin did not load (`path:line: message`); nothing re-runs."""

    error: str
    files: tuple[Path, ...] = ()


# -- from widgets ------------------------------------------------------------------------------
@dataclass
class ImplsPicked(Message):
    names: tuple[str, ...]


@dataclass
class ParamsEdited(Message):
    impl: str
    texts: dict[str, str]


@dataclass
class SpecEdited(Message):
    """Raw text of the spec editor: shape fields, dtype, actions, sweep."""

    shape: dict[str, str]
    dtype: str
    actions: tuple[str, ...]
    sweep_params: str
    sweep_values: str


@dataclass
class RunRequested(Message):
    pass


@dataclass
class CancelRequested(Message):
    pass


@dataclass
class OpenRequested(Message):
    path: Path


@dataclass
class Choice(Message):
    """A command-palette choice: kind 'op' | 'impl' | 'run', and its value."""

    kind: str
    value: Any
