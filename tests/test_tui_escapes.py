"""Issue 42 item 16 in the TUI: control characters in a session's name or an implementation's
label are written out before anything shows them (an escape reached the terminal raw and cleared
the screen: tried in tmux)."""

from workbench.screens.sessions_io import printable_session
from workbench.session.model import ImplRef, RunSpec, Session


def test_a_sessions_name_and_labels_are_written_out_once_with_a_note():
    raw = Session(name="evil\x1b[2J", runs=(RunSpec(op="gelu", impls=(ImplRef("pytorch"),
                                                                         ImplRef("manual", label="lab\x1b[2Jel"))),))
    session, notes = printable_session(raw)
    assert session.name == "evil\\x1b[2J" and session.runs[0].impls[1].label == "lab\\x1b[2Jel"
    assert session.runs[0].impls[0] == ImplRef("pytorch") and notes and "written out" in notes[0]
    assert printable_session(session) == (session, ())  # a clean session is left as it is
