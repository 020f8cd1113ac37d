"""JSON Schemas of the session file and the results document (workbench/schemas.py): the
committed copies are the generated ones, every shipped session validates and names its schema
for editors, the comment survives load -> save -> load, and the schemas refuse what the checkers
refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from workbench import schemas
from workbench.results.document import RECORD_KEYS, SUB_RECORD_KEYS, blank, new_document, new_record

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "sessions").glob("*.yaml")) + sorted((ROOT / "examples").glob("*.yaml"))
COMMENT = "# yaml-language-server: $schema=../docs/schemas/session.schema.json"


def _validator(kind):
    schema = schemas.schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("kind", schemas.KINDS)
def test_committed_schema_is_the_generated_one(kind):
    committed = ROOT / "docs" / "schemas" / f"{kind}.schema.json"
    assert committed.read_text() == schemas.dumps(kind), \
        f"docs/schemas/{kind}.schema.json is stale: workbench --schema {kind} -o {committed.relative_to(ROOT)}"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_session_validates_and_names_its_schema(path):
    text = path.read_text()
    assert text.splitlines()[0] == COMMENT
    assert (path.parent / "../docs/schemas/session.schema.json").resolve().is_file()
    errors = [e.message for e in _validator("session").iter_errors(yaml.safe_load(text))]
    assert errors == []


@pytest.mark.parametrize("name", ["lecture06-gelu.yaml", "smoke-quick.yaml"])
def test_the_schema_comment_survives_load_save_load(tmp_path, name):
    from workbench.session.api import leading_comments, load_session, save_session

    source = ROOT / "sessions" / name
    first = load_session(source)
    saved = save_session(first, tmp_path / name, header=leading_comments(source))
    assert saved.read_text().splitlines()[0] == COMMENT
    assert load_session(saved) == first


def test_a_saved_copys_schema_modeline_names_the_schema_from_where_it_is_saved(tmp_path):
    """The TUI saved a shipped session's copy to DATA/sessions with `../docs/schemas/...`,
    which names no file from there."""
    from workbench.screens import sessions_io
    from workbench.session.api import SCHEMA_COMMENT, load_session, shipped_path

    source = shipped_path("lecture06-gelu")
    saved = sessions_io.save(load_session(source), source, tmp_path / "data")
    line = saved.read_text().splitlines()[0]
    assert line.startswith(SCHEMA_COMMENT) and saved.parent == tmp_path / "data" / "sessions"
    named = (saved.parent / line[len(SCHEMA_COMMENT):]).resolve()
    assert named == (ROOT / "docs" / "schemas" / "session.schema.json").resolve()
    assert load_session(saved) == load_session(source)


@pytest.mark.parametrize("modeline, kept", [
    ("../nowhere/session.schema.json", None),  # names no file (a wheel ships no docs/): left out
    ("https://example.org/session.schema.json", "https://example.org/session.schema.json"),
    ("/abs/session.schema.json", "/abs/session.schema.json"),
])
def test_a_schema_modeline_that_names_no_file_is_left_out_and_urls_are_kept(tmp_path, modeline, kept):
    from workbench.session.api import SCHEMA_COMMENT, leading_comments

    source = tmp_path / "a" / "s.yaml"
    source.parent.mkdir()
    source.write_text(f"# first\n{SCHEMA_COMMENT}{modeline}\n# last\nschema_version: 1\n")
    header = leading_comments(source, tmp_path / "b" / "s.yaml")
    assert header == "# first\n" + (f"{SCHEMA_COMMENT}{kept}\n" if kept else "") + "# last\n"
    assert leading_comments(source).splitlines()[1] == SCHEMA_COMMENT + modeline  # no target: as it is


@pytest.mark.parametrize("change, where", [
    (lambda d: d.pop("name"), "name"),
    (lambda d: d["runs"][0].update(dtype="fp32"), "dtype"),
    (lambda d: d["runs"][0].update(actions=["bench", "bench"]), "actions"),
    (lambda d: d["runs"][0].update(colour="red"), "colour"),
    (lambda d: d["runs"][0].update(settings={"devices": "all"}), "devices"),   # a session setting only
    (lambda d: d["settings"].update(target_rel_error=1), "target_rel_error"),
    (lambda d: d["settings"].update(device="gpu"), "device"),
    (lambda d: d["runs"][0].update(compare=["a"]), "compare"),
])
def test_the_session_schema_refuses_what_the_checker_refuses(change, where):
    from workbench.session.api import SessionError, parse_session

    data = yaml.safe_load((ROOT / "sessions" / "lecture06-gelu.yaml").read_text())
    change(data)
    assert list(_validator("session").iter_errors(data)), where
    with pytest.raises(SessionError):
        parse_session(yaml.safe_dump(data))


def _complete_document():
    doc = new_document({"session": "t", "argv": ["workbench"]}, {"device": "cpu"})
    record = new_record(run_index=0, op="gelu", impl="triton", label="triton", status="ok")
    record.update({name: blank(keys) for name, keys in SUB_RECORD_KEYS.items()})
    doc["results"].append(record)
    return doc


def test_a_results_document_validates_and_a_missing_key_does_not():
    validator = _validator("results")
    doc = _complete_document()
    assert [e.message for e in validator.iter_errors(doc)] == []
    fixture = ROOT / "tests" / "fixtures" / "cpu_smoke_replay.json"  # written by this code's replay
    assert [e.message for e in validator.iter_errors(json.loads(fixture.read_text()))] == []
    for key in ("status", "profile"):
        broken = _complete_document()
        if key == "status":
            broken["results"][0]["status"] = "fine"
        else:
            del broken["results"][0]["profile"]["trace_path"]
        assert list(validator.iter_errors(broken)), key
    assert set(schemas.schema("results")["$defs"]["record"]["required"]) == set(RECORD_KEYS)


def test_schema_cli_prints_it_and_refuses_an_unknown_kind(capsys):
    from workbench.cli.main import main

    assert main(["--schema", "session"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "workbench session file"
    assert main(["--schema", "sessions"]) == 2
    assert "invalid choice: 'sessions'" in capsys.readouterr().err


def test_schema_cli_names_the_file_it_wrote(capsys, tmp_path):
    from workbench.cli.main import main

    target = tmp_path / "s.json"
    assert main(["--schema", "results", "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"schema written to {target}" in " ".join(captured.err.split())
    assert json.loads(target.read_text())["$defs"]


def test_a_watch_rows_last_good_validates_and_one_missing_its_sha256_does_not():
    from workbench.watch.diff import with_last_good

    validator = _validator("results")
    doc = _complete_document()
    good = doc["results"][0]
    files = [{"path": "/k/mine.py", "sha256": "a" * 64}]
    failed = {**good, "status": "failed", "error": "check failed: elementwise gate (first inputs): x"}
    doc["results"][0] = with_last_good(failed, good, {"plugins": files}, {"plugins": [{**files[0], "sha256": "b" * 64}]})
    assert [e.message for e in validator.iter_errors(doc)] == []
    del doc["results"][0]["last_good"]["changed"][0]["sha256_then"]
    assert ["'sha256_then' is a required property"] == [e.message for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("argv, message", [
    (["--format", "csv"], "--schema writes a JSON Schema (JSON), not csv"),
    (["-o", "{tmp}/s.csv"], "--schema writes a JSON Schema (JSON); end the path in .json"),
    (["-o", "{tmp}/s.yaml"], "--schema writes a JSON Schema (JSON); end the path in .json")])
def test_schema_cli_refuses_a_format_it_would_not_write(capsys, tmp_path, argv, message):
    """--format csv printed JSON, and -o s.csv got JSON, each exit 0 (a new user's try); -o s.yaml
    was refused as 'results are not a session'."""
    from workbench.cli.main import main

    assert main(["--schema", "session", *[a.format(tmp=tmp_path) for a in argv]]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in " ".join(captured.err.split())
    assert not list(tmp_path.iterdir())
