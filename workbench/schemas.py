"""JSON Schemas (draft 2020-12) of the session file and the results document, built from the code
that checks them, so that an editor can validate and complete a session (yaml-language-server's
`# yaml-language-server: $schema=...` line) and a tool can check a results document.

- session: the keys, kinds and allowed values of workbench/session/schema.py (TOP_KEYS,
  RUN_KEYS, IMPL_KEYS, SWEEP_KEYS, DTypes, ACTIONS), the settings' rules as JSON Schema
  (session_settings.SETTING_RULES, each rule's `schema`) and the A/B sides (session_compare).
  What only the registry knows (an op's names, shape fields, params) is not in it: `--check`
  says that.
- results: every key `results.missing_keys` requires (the document, provenance, environment,
  each record and its sub-records), the statuses, and the schema version. Keys added later are
  allowed (the contract is additive).

`workbench --schema session|results` prints one; docs/schemas/ holds committed copies
(tests/test_schemas.py checks them against these). Torch-free.
"""

from __future__ import annotations

import json
from typing import Any

from workbench.results import document as res
from workbench.dtypes import DType
from workbench.results.provenance import PROVENANCE_KEYS
from workbench.session.compare import SIDE_KEYS
from workbench.session.model import ACTIONS, SCHEMA_VERSION
from workbench.session.schema import IMPL_KEYS, RUN_KEYS, SWEEP_KEYS, TOP_KEYS
from workbench.session.settings import SESSION_ONLY, SETTING_KEYS, SETTING_RULES

DRAFT = "https://json-schema.org/draft/2020-12/schema"
KINDS = ("session", "results")
TEXT = {"type": "string", "pattern": r"\S"}  # non-empty text (not only blanks), as session_schema._text
PARAMS = {"type": "object", "description": "implementation parameters by name (the op's own: --list)"}


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of `kind` ("session" | "results")."""
    if kind == "session":
        return session_schema()
    if kind == "results":
        return results_schema()
    raise ValueError(f"unknown schema {kind!r}; allowed: {', '.join(KINDS)}")


def dumps(kind: str) -> str:
    """The schema as the committed docs/schemas/<kind>.schema.json text."""
    return json.dumps(schema(kind), indent=2) + "\n"


# -- the session file ------------------------------------------------------------------------
def _settings(run: bool) -> dict[str, Any]:
    keys = [k for k in SETTING_KEYS if not (run and k in SESSION_ONLY)]
    return {"type": "object", "additionalProperties": False,
            "properties": {k: dict(SETTING_RULES[k].schema) for k in keys}}  # type: ignore[attr-defined]


def _closed(properties: dict[str, Any], keys: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    assert set(properties) == set(keys), (sorted(properties), keys)  # every key the checker allows
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def session_schema() -> dict[str, Any]:
    impl = _closed({"name": TEXT, "params": PARAMS, "label": TEXT}, IMPL_KEYS, ("name",))
    side = _closed({"name": TEXT, "params": PARAMS, "label": TEXT,
                    "plugin": {**TEXT, "description": "a plugin file that registers `name`"},
                    "rev": {**TEXT, "description": "a git revision of the file that defines `name`"}},
                   SIDE_KEYS, ("name",))
    sweep = _closed({
        "params": {"oneOf": [TEXT, {"type": "array", "minItems": 1, "uniqueItems": True, "items": TEXT}],
                   "description": "shape fields or implementation params set together to each value"},
        "values": {"type": "array", "minItems": 1, "uniqueItems": True,
                   "items": {"type": ["number", "string"]}}}, SWEEP_KEYS, SWEEP_KEYS)
    run = _closed({
        "op": {**TEXT, "description": "an op's name (workbench --list)"},
        "impls": {"oneOf": [{"const": "all"},
                            {"type": "array", "minItems": 1, "items": {"oneOf": [TEXT, {"$ref": "#/$defs/impl"}]}}]},
        "shape": {"type": "object", "additionalProperties": {"type": "integer"},
                  "description": "the op's size fields, e.g. {M: 1024, N: 1024}"},
        "dtype": {"enum": [d.value for d in DType]},
        "actions": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(ACTIONS)}},
        "sweep": {"$ref": "#/$defs/sweep"},
        "settings": {"$ref": "#/$defs/run_settings"},
        "compare": {"type": "array", "minItems": 2, "maxItems": 2,
                    "items": {"oneOf": [TEXT, {"$ref": "#/$defs/side"}]},
                    "description": "A/B with confidence: [A, B]"}}, RUN_KEYS, ("op",))
    top = _closed({
        "schema_version": {"type": "integer", "minimum": 1, "maximum": SCHEMA_VERSION},
        "name": TEXT,
        "description": {"type": ["string", "null"]},
        "plugins": {"type": ["array", "null"], "items": TEXT},
        "settings": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/settings"}]},
        "runs": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/run"}}},
        TOP_KEYS, ("schema_version", "name", "runs"))
    return {"$schema": DRAFT, "title": "workbench session file",
            "description": "docs/CONTRACTS.md, \"Session file\"; generated by `workbench --schema session`",
            **top, "$defs": {"run": run, "impl": impl, "side": side, "sweep": sweep,
                             "settings": _settings(run=False), "run_settings": _settings(run=True)}}


# -- the results document --------------------------------------------------------------------
def _keys(keys: tuple[str, ...], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(keys), "properties": properties}


# watch mode's optional key of a row whose current code fails (docs/CONTRACTS.md "Watch mode")
LAST_GOOD = {**_keys(("record", "plugins", "session_sha256", "started", "changed"),
                     record={"type": "object"}, plugins={"type": ["array", "null"]},
                     changed={"type": "array", "items": _keys(("path", "sha256_then", "sha256_now"))}),
             "description": "watch mode, a row whose current code fails: its last ok record, measured from the "
                            "plugin files (path, sha256) in `plugins`; `changed`: those whose sha256 differs now"}


def results_schema() -> dict[str, Any]:
    subs = {name: {"oneOf": [{"type": "null"}, _keys(keys)]} for name, keys in res.SUB_RECORD_KEYS.items()}
    record = _keys(res.RECORD_KEYS, status={"enum": list(res.STATUSES)}, run_index={"type": "integer"},
                   op={"type": "string"}, impl={"type": "string"}, label={"type": "string"},
                   flags={"type": "array", "items": {"type": "string"}}, diagnosis={"type": "array"},
                   last_good=LAST_GOOD, **subs)
    document = _keys(res.DOCUMENT_KEYS, schema_version={"const": res.SCHEMA_VERSION},
                     provenance=_keys(PROVENANCE_KEYS), environment=_keys(res.ENVIRONMENT_KEYS),
                     results={"type": "array", "items": {"$ref": "#/$defs/record"}},
                     cancelled={"type": "boolean"}, cancel_signal={"type": ["string", "null"]},
                     ab={"type": "array"})
    return {"$schema": DRAFT, "title": "workbench results document",
            "description": "docs/CONTRACTS.md, \"Results\"; every key always present (null: not measured); "
                           "generated by `workbench --schema results`",
            **document, "$defs": {"record": record}}
