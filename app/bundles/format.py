"""What a v1 bundle line looks like: one declarative table of line kinds, their fields and the
types those fields hold, written once.

Everything else reads it: admission (known kinds, their order, required and allowed fields,
the field types and the failure each names), the decoding Structs of app/bundles/lines.py
(generated from it), the fast lanes' column checks, and the Node verifier, whose copy of the
table between its `FORMAT TABLE` markers is generated from this one (`python -m
app.bundles.format --write`; a test holds both copies to this table).

A type is a JSON value, so that both verifiers read the same table:
`{"type": "string" | "digest" | "integer" | "number" | "boolean" | "any"}`,
`{"type": "nullable", "of": T}`, `{"type": "list", "of": T}`,
`{"type": "one_of", "values": [...]}`, `{"type": "object", "fields": {name: T}, "exact": b,
"may_omit": [...]}` (a field named is read as null when absent, unless it may be omitted),
and `{"type": "shape", "message": M, "rules": [[field, T, message(, "may_omit")], ...]}`: an
object whose first broken rule names what is wrong (M when it is not an object at all).
"""

from __future__ import annotations

from typing import Any

from app.domain.vocabulary import ASSURANCE_LEVELS, CASE_STATUSES

FORMAT = "evalbook.reproducibility_bundle.v1"
MEDIA_TYPE = "application/vnd.evalbook.bundle.v1+jsonl.gzip"
CASE_LIMIT = 20_000

Type = dict[str, Any]
STRING: Type = {"type": "string"}
DIGEST: Type = {"type": "digest"}
INTEGER: Type = {"type": "integer"}  # 0 .. 2^53 - 1; 1.0 counts (JSON has one number type)
NUMBER: Type = {"type": "number"}
BOOLEAN: Type = {"type": "boolean"}
ANY: Type = {"type": "any"}
# A case's measures: an object of at most 16 identifiers, each a finite number >= 0.
MEASURES: Type = {"type": "measures"}
OBJECT: Type = {"type": "object", "fields": {}, "exact": False, "may_omit": []}


def nullable(of: Type) -> Type:
    """`of`, or null."""
    return {"type": "nullable", "of": of}


def list_of(of: Type) -> Type:
    """A list whose every item is `of`."""
    return {"type": "list", "of": of}


def one_of(values: tuple[str, ...]) -> Type:
    """One of these values."""
    return {"type": "one_of", "values": list(values)}


def object_with(exact: bool = False, may_omit: tuple[str, ...] = (), **fields: Type) -> Type:
    """An object whose named fields hold their types (`exact`: and no other field)."""
    return {"type": "object", "fields": fields, "exact": exact, "may_omit": list(may_omit)}


def shape(message: str, *rules: tuple[str, Type, str] | tuple[str, Type, str, str]) -> Type:
    """An object checked rule by rule, each broken rule naming what is wrong (a rule ending in
    "may_omit" holds when its field is absent)."""
    return {"type": "shape", "message": message, "rules": [list(rule) for rule in rules]}


NAMED = object_with(name=STRING, version=STRING, digest=STRING)
MAYBE_OBJECT = nullable(OBJECT)
BODY_CHECK = object_with(
    may_omit=("slices",),
    check_id=STRING,
    evidence_refs=list_of(ANY),
    evidence_manifest=BOOLEAN,
    comparison=MAYBE_OBJECT,
    slices=list_of(object_with(comparison=MAYBE_OBJECT)),
)
EACH_CHECK = "each check of the body has check_id, evidence_refs, evidence_manifest"
BODY = shape(
    "the body is an object",
    ("report_id", STRING, "the body has a report_id and a subject"),
    ("subject", OBJECT, "the body has a report_id and a subject"),
    ("suite_ref", object_with(digest=STRING), "the body's suite_ref has a digest"),
    ("dataset_refs", list_of(NAMED), "the body's dataset_refs are {digest, name, version}"),
    ("checks", list_of(ANY), "the body's checks are a list"),
    ("checks", list_of(BODY_CHECK), EACH_CHECK),
)
SUITE_CONTENT = shape(
    "the suite_version line has a digest and a content object",
    (
        "checks",
        list_of(
            object_with(
                may_omit=("scorer", "dataset"),
                scorer=NAMED,
                dataset=object_with(digest=STRING),
                check_id=STRING,
            )
        ),
        "the suite's checks have check_id, scorer and dataset",
        "may_omit",
    ),
)
TRACE_REF = object_with(exact=True, digest=DIGEST, id=STRING)


def _field(name: str, type_: Type, absent: str | None = None) -> list[Any]:
    """[name, type] of a required field; [name, type, "unset" | "null"] of an optional one
    (what its Struct holds when it is absent)."""
    return [name, type_] if absent is None else [name, type_, absent]


CASE_FIELDS = [
    _field("check_id", STRING),
    _field("example_id", STRING),
    _field("repeat", INTEGER),
    _field("status", one_of(CASE_STATUSES)),
    _field("score", nullable(NUMBER)),
    _field("output_digest", nullable(DIGEST)),
    _field("evidence_refs", list_of(DIGEST)),
    _field("assurance", one_of(ASSURANCE_LEVELS)),
    _field("scorer_digest", DIGEST),
    _field("output", ANY, "unset"),
    _field("trace_ref", TRACE_REF, "unset"),
    _field("measures", MEASURES, "unset"),
]
CASE_CHECKS = [
    [["check_id", "example_id"], "check_id and example_id are strings"],
    [["repeat"], "repeat is an integer from 0"],
    [["status"], "status is a case status"],
    [["score"], "score is a number or null"],
    [["output_digest"], "output_digest is a digest or null"],
    [["evidence_refs"], "evidence_refs is a list of digests"],
    [["assurance"], "assurance is an assurance level"],
    [["scorer_digest"], "scorer_digest is a digest"],
    [["trace_ref"], 'trace_ref is {"digest", "id"}'],
    [["measures"], "measures are at most 16 named numbers >= 0"],
]


# A mistyped case is reported by its check, after the order checks (not at admission).
CASE_KIND = {"phase": 5, "fields": CASE_FIELDS, "checks": CASE_CHECKS, "checked": "later"}


# A judged check's human label (docs/judges.md): its bound fields, and its note when the
# exporter may read bodies.
LABEL_FIELDS = [
    _field("check_id", STRING),
    _field("example_id", STRING),
    _field("label", ANY),
    _field("labeller", STRING),
    _field("assurance", one_of(ASSURANCE_LEVELS)),
    _field("note", ANY, "unset"),
]
LABEL_KIND = {
    "phase": 5,
    "fields": LABEL_FIELDS,
    "checks": [
        [
            ["check_id", "example_id", "labeller"],
            "a label line's check_id, example_id and labeller are strings",
        ],
        [["assurance"], "a label line's assurance is an assurance level"],
    ],
}


# Each kind: its phase (kinds come in phase order), whether a bundle holds it once, its fields
# in the order a missing one is named (required first; optional ones say what an absent one
# decodes to), and its checks in order: fields and the failure they name (null: the field's
# shape names it).
KINDS: dict[str, dict[str, Any]] = {
    "header": {
        "phase": 0,
        "once": True,
        "fields": [
            _field("format", STRING),
            _field("report_id", STRING),
            _field("report_digest", STRING),
            _field("created_at", STRING),
            _field("exporter", object_with(token_name=STRING, permissions=list_of(STRING))),
            _field("producer", OBJECT),
            _field("baseline_evaluation_id", nullable(STRING)),
            _field("keys", ANY, "unset"),
        ],
        "checks": [
            [
                [
                    "format",
                    "report_id",
                    "report_digest",
                    "created_at",
                    "exporter",
                    "producer",
                    "baseline_evaluation_id",
                ],
                "the header's fields have the wrong types",
            ]
        ],
    },
    "report": {
        "phase": 1,
        "once": True,
        "fields": [
            _field("digest", STRING),
            _field("body", BODY),
            _field("envelope", OBJECT),
            _field("attestation", ANY, "null"),
            _field("supersessions", ANY, "null"),
            _field("log", ANY, "null"),
            _field("test_result", ANY, "null"),
        ],
        "checks": [
            [["digest", "envelope"], "the report line has a digest and an envelope object"],
            [["body"], None],
        ],
    },
    "suite_version": {
        "phase": 2,
        "once": True,
        "fields": [_field("digest", STRING), _field("content", SUITE_CONTENT)],
        "checks": [
            [["digest"], "the suite_version line has a digest and a content object"],
            [["content"], None],
        ],
    },
    "scorer_version": {
        "phase": 3,
        "fields": [
            _field("name", STRING),
            _field("version", STRING),
            _field("digest", STRING),
            _field("definition", ANY),
            _field("score_range", ANY),
        ],
        "checks": [
            [
                ["name", "version", "digest"],
                "a scorer_version line's name, version and digest are strings",
            ]
        ],
    },
    "dataset_version": {
        "phase": 4,
        "fields": [
            _field("name", STRING),
            _field("version", STRING),
            _field("digest", STRING),
            _field("example_count", INTEGER),
        ],
        "checks": [
            [
                ["name", "version", "digest", "example_count"],
                "a dataset_version line's name, version, digest, example_count",
            ]
        ],
    },
    "example": {
        "phase": 4,
        "fields": [
            _field("dataset", STRING),
            _field("id", STRING),
            _field("tags", list_of(STRING)),
            _field("body_digest", STRING),
            _field("body", ANY, "unset"),
        ],
        "checks": [
            [
                ["dataset", "id", "body_digest", "tags"],
                "an example line's dataset, id, body_digest and tags",
            ]
        ],
    },
    "check": {
        "phase": 5,
        "fields": [
            _field("check_id", STRING),
            _field("result", ANY),
            _field("manifest", ANY, "null"),
        ],
        "checks": [[["check_id"], "a check line's check_id is a string"]],
    },
    "case": CASE_KIND,
    "baseline_case": CASE_KIND,
    "label": LABEL_KIND,
    "baseline_label": LABEL_KIND,
    "unavailable": {"phase": 6, "fields": [_field("items", ANY)], "checks": []},
    "redacted": {"phase": 7, "fields": [_field("items", ANY)], "checks": []},
    "trailer": {
        "phase": 8,
        "fields": [_field("lines", ANY), _field("sha256", ANY)],
        "checks": [],
    },
}

# What an unavailable or redacted item may name, per list and reason; the fields of its ref;
# what it adds beside what, ref and reason.
ITEM_WHAT = {
    "unavailable stored_at_sso": ["case_output"],
    "unavailable retention": ["example_body", "case_output"],
    "unavailable scorer_missing": ["scorer_version"],
    "unavailable scorer_digest_mismatch": ["scorer_version"],
    "unavailable case_limit": ["cases"],
    "redacted permission": ["example_bodies", "case_outputs", "label_notes"],
    "redacted trace_capture_policy": ["trace_bodies"],
}
REF_FIELDS = {
    "scorer_version": ["digest", "name", "version"],
    "example_body": ["dataset", "example_id"],
    "example_bodies": ["dataset"],
    "case_output": ["check_id", "example_id", "kind", "repeat"],
    "case_outputs": ["check_id", "kind"],
    "label_notes": ["check_id", "kind"],
    "trace_bodies": ["check_id", "kind"],
    "cases": ["check_id", "kind"],
}
ITEM_EXTRA = {
    "scorer_version": [],
    "example_body": [],
    "example_bodies": ["count"],
    "case_output": ["digest"],
    "case_outputs": ["count"],
    "label_notes": ["count"],
    "trace_bodies": ["count"],
    "cases": ["count", "first", "last", "consistency_proof"],
}
KEY_FIELDS = ["alg", "created_at", "keyid", "public_key", "retired_at", "status"]

# Derived once, for the readers that look fields up by kind.
PHASES = {kind: spec["phase"] for kind, spec in KINDS.items()}
ONCE = frozenset(kind for kind, spec in KINDS.items() if spec.get("once"))
REQUIRED = {
    kind: tuple(f[0] for f in spec["fields"] if len(f) == 2) for kind, spec in KINDS.items()
}
OPTIONAL = {
    kind: tuple(f[0] for f in spec["fields"] if len(f) == 3) for kind, spec in KINDS.items()
}
ALLOWED = {kind: frozenset(("kind", *REQUIRED[kind], *OPTIONAL[kind])) for kind in KINDS}
FIELD_TYPES = {kind: {f[0]: f[1] for f in spec["fields"]} for kind, spec in KINDS.items()}


def table() -> dict[str, Any]:
    """The whole table as one JSON value (what the Node verifier's copy holds)."""
    return {
        "format": FORMAT,
        "kinds": KINDS,
        "items": {"what": ITEM_WHAT, "ref_fields": REF_FIELDS, "extra": ITEM_EXTRA},
        "key_fields": KEY_FIELDS,
    }
