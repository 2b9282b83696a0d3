#!/usr/bin/env -S node --no-concurrent-recompilation
// verify-bundle.mjs FILE [--json] [--key PEM_OR_BASE64]... [--keys FILE]... [--require-trust] [--log-key VKEY] [--witness-key VKEY]... [--min-witnesses N] [--log URL]
// Verify an EvalBook reproducibility bundle v1 offline: Node.js 18 or newer, no dependencies
// (node:zlib, node:crypto, its own RFC 8785 canonicalizer and RFC 6962 Merkle tree).
// Exit 0 when everything provable was proven, 1 when anything failed, 2 for a file that is not
// a bundle (or a bad argument). Every check, its failure code and the line it names mirror
// `evalbook verify-bundle` (app/bundles/); the test suite holds the two to the same answers.
// One file on purpose: a consumer copies it and runs it. Its shape is the Python verifier's:
// the format's table (generated from app/bundles/format.py), the facts a verification gathers
// (`Facts`), and checks as functions over those facts (one per line kind, `LINE_CHECKS`).

import { spawnSync } from "node:child_process";
import * as crypto from "node:crypto";
import { createHash, createPublicKey, verify as verifySignature } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { constants as zlibConstants, createGunzip, gunzipSync } from "node:zlib";
import * as nodeBuffer from "node:buffer";

const FORMAT = "evalbook.reproducibility_bundle.v1";
const PREFIX = "sha256:";
// ---- FORMAT TABLE: generated from app/bundles/format.py (python -m app.bundles.codegen) ----
const TABLE = {
  "format": "evalbook.reproducibility_bundle.v1",
  "kinds": {
    "header": {"phase": 0, "once": true, "fields": [["format", {"type": "string"}], ["report_id", {"type": "string"}], ["report_digest", {"type": "string"}], ["created_at", {"type": "string"}], ["exporter", {"type": "object", "fields": {"token_name": {"type": "string"}, "permissions": {"type": "list", "of": {"type": "string"}}}, "exact": false, "may_omit": []}], ["producer", {"type": "object", "fields": {}, "exact": false, "may_omit": []}], ["baseline_evaluation_id", {"type": "nullable", "of": {"type": "string"}}], ["keys", {"type": "any"}, "unset"]], "checks": [[["format", "report_id", "report_digest", "created_at", "exporter", "producer", "baseline_evaluation_id"], "the header's fields have the wrong types"]]},
    "report": {"phase": 1, "once": true, "fields": [["digest", {"type": "string"}], ["body", {"type": "shape", "message": "the body is an object", "rules": [["report_id", {"type": "string"}, "the body has a report_id and a subject"], ["subject", {"type": "object", "fields": {}, "exact": false, "may_omit": []}, "the body has a report_id and a subject"], ["suite_ref", {"type": "object", "fields": {"digest": {"type": "string"}}, "exact": false, "may_omit": []}, "the body's suite_ref has a digest"], ["dataset_refs", {"type": "list", "of": {"type": "object", "fields": {"name": {"type": "string"}, "version": {"type": "string"}, "digest": {"type": "string"}}, "exact": false, "may_omit": []}}, "the body's dataset_refs are {digest, name, version}"], ["checks", {"type": "list", "of": {"type": "any"}}, "the body's checks are a list"], ["checks", {"type": "list", "of": {"type": "object", "fields": {"check_id": {"type": "string"}, "evidence_refs": {"type": "list", "of": {"type": "any"}}, "evidence_manifest": {"type": "boolean"}, "comparison": {"type": "nullable", "of": {"type": "object", "fields": {}, "exact": false, "may_omit": []}}, "slices": {"type": "list", "of": {"type": "object", "fields": {"comparison": {"type": "nullable", "of": {"type": "object", "fields": {}, "exact": false, "may_omit": []}}}, "exact": false, "may_omit": []}}}, "exact": false, "may_omit": ["slices"]}}, "each check of the body has check_id, evidence_refs, evidence_manifest"]]}], ["envelope", {"type": "object", "fields": {}, "exact": false, "may_omit": []}], ["attestation", {"type": "any"}, "null"], ["supersessions", {"type": "any"}, "null"], ["log", {"type": "any"}, "null"], ["test_result", {"type": "any"}, "null"]], "checks": [[["digest", "envelope"], "the report line has a digest and an envelope object"], [["body"], null]]},
    "suite_version": {"phase": 2, "once": true, "fields": [["digest", {"type": "string"}], ["content", {"type": "shape", "message": "the suite_version line has a digest and a content object", "rules": [["checks", {"type": "list", "of": {"type": "object", "fields": {"scorer": {"type": "object", "fields": {"name": {"type": "string"}, "version": {"type": "string"}, "digest": {"type": "string"}}, "exact": false, "may_omit": []}, "dataset": {"type": "object", "fields": {"digest": {"type": "string"}}, "exact": false, "may_omit": []}, "check_id": {"type": "string"}}, "exact": false, "may_omit": ["scorer", "dataset"]}}, "the suite's checks have check_id, scorer and dataset", "may_omit"]]}]], "checks": [[["digest"], "the suite_version line has a digest and a content object"], [["content"], null]]},
    "scorer_version": {"phase": 3, "fields": [["name", {"type": "string"}], ["version", {"type": "string"}], ["digest", {"type": "string"}], ["definition", {"type": "any"}], ["score_range", {"type": "any"}]], "checks": [[["name", "version", "digest"], "a scorer_version line's name, version and digest are strings"]]},
    "dataset_version": {"phase": 4, "fields": [["name", {"type": "string"}], ["version", {"type": "string"}], ["digest", {"type": "string"}], ["example_count", {"type": "integer"}]], "checks": [[["name", "version", "digest", "example_count"], "a dataset_version line's name, version, digest, example_count"]]},
    "example": {"phase": 4, "fields": [["dataset", {"type": "string"}], ["id", {"type": "string"}], ["tags", {"type": "list", "of": {"type": "string"}}], ["body_digest", {"type": "string"}], ["body", {"type": "any"}, "unset"]], "checks": [[["dataset", "id", "body_digest", "tags"], "an example line's dataset, id, body_digest and tags"]]},
    "check": {"phase": 5, "fields": [["check_id", {"type": "string"}], ["result", {"type": "any"}], ["manifest", {"type": "any"}, "null"]], "checks": [[["check_id"], "a check line's check_id is a string"]]},
    "case": {"phase": 5, "fields": [["check_id", {"type": "string"}], ["example_id", {"type": "string"}], ["repeat", {"type": "integer"}], ["status", {"type": "one_of", "values": ["pass", "fail", "error", "timeout", "cancelled", "skipped", "unsupported", "abstained"]}], ["score", {"type": "nullable", "of": {"type": "number"}}], ["output_digest", {"type": "nullable", "of": {"type": "digest"}}], ["evidence_refs", {"type": "list", "of": {"type": "digest"}}], ["assurance", {"type": "one_of", "values": ["development_unisolated", "reported", "independently_observed", "human_attested", "platform_verified"]}], ["scorer_digest", {"type": "digest"}], ["output", {"type": "any"}, "unset"], ["trace_ref", {"type": "object", "fields": {"digest": {"type": "digest"}, "id": {"type": "string"}}, "exact": true, "may_omit": []}, "unset"], ["measures", {"type": "measures"}, "unset"]], "checks": [[["check_id", "example_id"], "check_id and example_id are strings"], [["repeat"], "repeat is an integer from 0"], [["status"], "status is a case status"], [["score"], "score is a number or null"], [["output_digest"], "output_digest is a digest or null"], [["evidence_refs"], "evidence_refs is a list of digests"], [["assurance"], "assurance is an assurance level"], [["scorer_digest"], "scorer_digest is a digest"], [["trace_ref"], "trace_ref is {\"digest\", \"id\"}"], [["measures"], "measures are at most 16 named numbers >= 0"]], "checked": "later"},
    "baseline_case": {"phase": 5, "fields": [["check_id", {"type": "string"}], ["example_id", {"type": "string"}], ["repeat", {"type": "integer"}], ["status", {"type": "one_of", "values": ["pass", "fail", "error", "timeout", "cancelled", "skipped", "unsupported", "abstained"]}], ["score", {"type": "nullable", "of": {"type": "number"}}], ["output_digest", {"type": "nullable", "of": {"type": "digest"}}], ["evidence_refs", {"type": "list", "of": {"type": "digest"}}], ["assurance", {"type": "one_of", "values": ["development_unisolated", "reported", "independently_observed", "human_attested", "platform_verified"]}], ["scorer_digest", {"type": "digest"}], ["output", {"type": "any"}, "unset"], ["trace_ref", {"type": "object", "fields": {"digest": {"type": "digest"}, "id": {"type": "string"}}, "exact": true, "may_omit": []}, "unset"], ["measures", {"type": "measures"}, "unset"]], "checks": [[["check_id", "example_id"], "check_id and example_id are strings"], [["repeat"], "repeat is an integer from 0"], [["status"], "status is a case status"], [["score"], "score is a number or null"], [["output_digest"], "output_digest is a digest or null"], [["evidence_refs"], "evidence_refs is a list of digests"], [["assurance"], "assurance is an assurance level"], [["scorer_digest"], "scorer_digest is a digest"], [["trace_ref"], "trace_ref is {\"digest\", \"id\"}"], [["measures"], "measures are at most 16 named numbers >= 0"]], "checked": "later"},
    "label": {"phase": 5, "fields": [["check_id", {"type": "string"}], ["example_id", {"type": "string"}], ["label", {"type": "any"}], ["labeller", {"type": "string"}], ["assurance", {"type": "one_of", "values": ["development_unisolated", "reported", "independently_observed", "human_attested", "platform_verified"]}], ["note", {"type": "any"}, "unset"]], "checks": [[["check_id", "example_id", "labeller"], "a label line's check_id, example_id and labeller are strings"], [["assurance"], "a label line's assurance is an assurance level"]]},
    "baseline_label": {"phase": 5, "fields": [["check_id", {"type": "string"}], ["example_id", {"type": "string"}], ["label", {"type": "any"}], ["labeller", {"type": "string"}], ["assurance", {"type": "one_of", "values": ["development_unisolated", "reported", "independently_observed", "human_attested", "platform_verified"]}], ["note", {"type": "any"}, "unset"]], "checks": [[["check_id", "example_id", "labeller"], "a label line's check_id, example_id and labeller are strings"], [["assurance"], "a label line's assurance is an assurance level"]]},
    "unavailable": {"phase": 6, "fields": [["items", {"type": "any"}]], "checks": []},
    "redacted": {"phase": 7, "fields": [["items", {"type": "any"}]], "checks": []},
    "trailer": {"phase": 8, "fields": [["lines", {"type": "any"}], ["sha256", {"type": "any"}]], "checks": []}
  },
  "items": {
    "what": {"unavailable stored_at_sso": ["case_output"], "unavailable retention": ["example_body", "case_output"], "unavailable scorer_missing": ["scorer_version"], "unavailable scorer_digest_mismatch": ["scorer_version"], "unavailable case_limit": ["cases"], "redacted permission": ["example_bodies", "case_outputs", "label_notes"], "redacted trace_capture_policy": ["trace_bodies"]},
    "ref_fields": {"scorer_version": ["digest", "name", "version"], "example_body": ["dataset", "example_id"], "example_bodies": ["dataset"], "case_output": ["check_id", "example_id", "kind", "repeat"], "case_outputs": ["check_id", "kind"], "label_notes": ["check_id", "kind"], "trace_bodies": ["check_id", "kind"], "cases": ["check_id", "kind"]},
    "extra": {"scorer_version": [], "example_body": [], "example_bodies": ["count"], "case_output": ["digest"], "case_outputs": ["count"], "label_notes": ["count"], "trace_bodies": ["count"], "cases": ["count", "first", "last", "consistency_proof"]}
  },
  "key_fields": ["alg", "created_at", "keyid", "public_key", "retired_at", "status"]
};
// ---- end of FORMAT TABLE ----
// What the table says, looked up by kind (app/bundles/format.py derives the same).
const KINDS = TABLE.kinds;
const PHASES = Object.fromEntries(Object.entries(KINDS).map(([kind, spec]) => [kind, spec.phase]));
const REQUIRED = Object.fromEntries(Object.entries(KINDS).map(
  ([kind, spec]) => [kind, spec.fields.filter((f) => f.length === 2).map((f) => f[0])]));
const ALLOWED = Object.fromEntries(Object.entries(KINDS).map(
  ([kind, spec]) => [kind, new Set(["kind", ...spec.fields.map((f) => f[0])])]));
const FIELD_TYPES = Object.fromEntries(Object.entries(KINDS).map(
  ([kind, spec]) => [kind, Object.fromEntries(spec.fields.map((f) => [f[0], f[1]]))]));
// The line kinds a bundle holds once.
const ONCE = new Set(Object.keys(KINDS).filter((kind) => KINDS[kind].once));
const CASE_STATUSES = FIELD_TYPES.case.status.values;
const ASSURANCE_LEVELS = FIELD_TYPES.case.assurance.values;
const ITEM_WHAT = TABLE.items.what;
const REF_FIELDS = TABLE.items.ref_fields;
const ITEM_EXTRA = TABLE.items.extra;
const KEY_FIELDS = TABLE.key_fields;
const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
const REPORT_PREDICATE = "https://evalbook.dev/attestations/report/v1";
const SUPERSESSION_PREDICATE = "https://evalbook.dev/attestations/supersession/v1";
const NO_SIGNED_SUPERSESSION = "status: superseded when exported, with no signed statement";
const PAYLOAD_TYPE = "application/vnd.in-toto+json";
const NO_ATTESTATION = "signer: the report carries no attestation";
const PREDATES = "cases: the report predates case trees";
const MAX_DEPTH = 100;
const MAX_SAFE = 2n ** 53n - 1n;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const HEADER_ERRORS = ["incorrect header check", "unknown compression method",
  "unknown header flags set", "header crc mismatch"];

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

class NotABundle extends Error {}
class BadArgument extends Error {}
class GzipDamage extends Error {
  constructor(code, what) {
    super(what);
    this.code = code;
  }
}

// ---- RFC 8785 ---------------------------------------------------------------------------

/** The canonical JSON text of a parsed value (RFC 8785). */
export function canonicalize(value) {
  refuseOutsideJson(value);
  return write(value);
}

// Whether a line of JSON text is canonical, as the verifier decides it for each line (for tests).
export function isCanonicalText(text) {
  return isCanonical(JSON.parse(text), text);
}

function refuseOutsideJson(value) {
  if (typeof value === "number" && !Number.isFinite(value)) throw new Error("non-finite number");
  if (typeof value === "string" && LONE_SURROGATE.test(value)) throw new Error("a lone surrogate");
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      refuseOutsideJson(key);
      refuseOutsideJson(item);
    }
  }
}

// Set (by `noteRange`, from `write`, `keysAscend` and `spelled`) when a number is not finite or
// beyond ±(2^53 − 1): the line then gets the exact token scan, which decides whether its text
// held an out-of-range number.
let outOfRange = false;
const noteRange = (number) => {
  if (!Number.isFinite(number) || number > Number.MAX_SAFE_INTEGER || number < -Number.MAX_SAFE_INTEGER) outOfRange = true;
};

function write(value) {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      noteRange(value);
      // ECMAScript Number::toString is the form RFC 8785 prescribes (-0 prints as 0).
      return JSON.stringify(value);
    case "string":
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) {
        // A list of strings (a manifest of digests) is written by JSON.stringify as RFC 8785
        // writes it, without building it item by item.
        if (value.every(isString)) return JSON.stringify(value);
        let out = "[";
        for (let i = 0; i < value.length; i++) out += (i ? "," : "") + write(value[i]);
        return out + "]";
      }
      // The default sort compares UTF-16 code units, as RFC 8785 orders keys.
      const keys = Object.keys(value).sort();
      let out = "{";
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        out += (i ? "," : "") + JSON.stringify(key) + ":" + write(value[key]);
      }
      return out + "}";
    }
    default:
      throw new Error(`not a JSON value: ${typeof value}`);
  }
}

// Whether every object's keys, in the parsed value's own order, ascend as RFC 8785 sorts them
// (by UTF-16 code units). Then JSON.stringify writes the value as RFC 8785 does: its numbers
// and strings are ECMAScript's own forms (a lone surrogate was refused before parsing), so a
// line is canonical exactly when JSON.stringify gives it back. V8 lists integer-like keys
// first, so a canonical object may fail this; `write` then decides. Numbers that are not
// finite or beyond ±(2^53 − 1) set `outOfRange` (every number is visited).
function keysAscend(value) {
  if (typeof value === "number") {
    noteRange(value);
    return true;
  }
  if (value === null || typeof value !== "object") return true;
  let ascending = true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      if (typeof item !== "string" && !keysAscend(item)) ascending = false;
    }
    return ascending;
  }
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    if (i && !(keys[i - 1] < keys[i])) ascending = false;
    const item = value[keys[i]];
    if (typeof item !== "string" && !keysAscend(item)) ascending = false;
  }
  return ascending;
}

// Strings this long are measured in place rather than compared (most of a bundle's bytes are
// outputs).
const LONG = 256;

// Whether `text` holds `written` from `at` (a slice compares faster than startsWith here).
const holds = (text, at, written) => text.slice(at, at + written.length) === written;

// The index in `text` just after `value` spelled from `at` as RFC 8785 writes it, or -1: for a
// text without a backslash that parsed to `value`. No string then needs an escape, so each is
// its characters between quotes. A long one is only measured: its closing quote is the first
// after its opening one, and the rest of the text is spelled exactly, keys included, so the
// text has the value's own structure and what lies between those quotes is that string. Keys
// must ascend in V8's own order (else -1, and `write` decides); every number the walk reaches
// sets `outOfRange` as `keysAscend` does.
function spelled(value, text, at) {
  if (value === null) return holds(text, at, "null") ? at + 4 : -1;
  switch (typeof value) {
    case "string": {
      if (text.charCodeAt(at) !== 34) return -1;
      const end = at + 1 + value.length;
      if (value.length > LONG) return text.indexOf('"', at + 1) === end ? end + 1 : -1;
      return text.charCodeAt(end) === 34 && text.slice(at + 1, end) === value ? end + 1 : -1;
    }
    case "number":
      noteRange(value);
    // falls through: JSON.stringify writes a finite number and a boolean as RFC 8785 does
    case "boolean": {
      const written = JSON.stringify(value);
      return holds(text, at, written) ? at + written.length : -1;
    }
    default:
      break;
  }
  if (Array.isArray(value)) {
    if (text.charCodeAt(at) !== 91) return -1;
    at += 1;
    for (let i = 0; i < value.length; i++) {
      if (i) {
        if (text.charCodeAt(at) !== 44) return -1;
        at += 1;
      }
      at = spelled(value[i], text, at);
      if (at < 0) return -1;
    }
    return text.charCodeAt(at) === 93 ? at + 1 : -1;
  }
  if (text.charCodeAt(at) !== 123) return -1;
  at += 1;
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (i) {
      if (text.charCodeAt(at) !== 44 || !(keys[i - 1] < key)) return -1;
      at += 1;
    }
    const end = at + 1 + key.length;
    if (text.charCodeAt(at) !== 34 || text.slice(at + 1, end) !== key) return -1;
    if (text.charCodeAt(end) !== 34 || text.charCodeAt(end + 1) !== 58) return -1;
    at = spelled(value[key], text, end + 2);
    if (at < 0) return -1;
  }
  return text.charCodeAt(at) === 125 ? at + 1 : -1;
}

// A text the walk spells whole is canonical (and it reached every number); any other is
// decided as before: by `write` when keys do not ascend, else by JSON.stringify (which, keys
// ascending, writes what RFC 8785 writes).
function isCanonical(value, text) {
  const plain = !text.includes("\\");
  if (plain && spelled(value, text, 0) === text.length) return true;
  if (!keysAscend(value)) return write(value) === text;
  return !plain && JSON.stringify(value) === text;
}

const sha256 = () => createHash("sha256");
// crypto.hash (Node 20.12 and later) hashes a small input several times faster.
const oneShot = typeof crypto.hash === "function"
  ? (data, encoding) => crypto.hash("sha256", data, encoding)
  : (data, encoding) => sha256().update(data).digest(encoding);
const digestOfText = (text) => PREFIX + oneShot(text, "hex");
const digestOf = (value) => digestOfText(write(value));
const hexDigest = (buffer) => PREFIX + buffer.toString("hex");
const str = (value) => (value === undefined || value === null ? null : typeof value === "string" ? value : pyRepr(value));
const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const isString = (value) => typeof value === "string";
const isInteger = (value) => typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
const isDigest = (value) => isString(value) && DIGEST.test(value);
const sameKeys = (value, names) => {
  const keys = Object.keys(value).sort();
  return keys.length === names.length && keys.every((k, i) => k === names[i]);
};
const isEmpty = (value) => value === null || (isObject(value) && Object.keys(value).length === 0);

// Expected/actual values are printed the way the Python verifier prints them.
function pyRepr(value) {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return "[" + value.map((v) => (typeof v === "string" ? `'${v}'` : pyRepr(v))).join(", ") + "]";
  return String(value);
}

function strictBase64(value) {
  if (!isString(value) || value.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) return null;
  const data = Buffer.from(value, "base64");
  return data.toString("base64") === value ? data : null;
}

// ---- RFC 6962 ---------------------------------------------------------------------------

// Tree hashes are binary strings (32 Latin-1 characters, one a byte): crypto.hash gives one
// four times faster than a Buffer, and a string on V8's heap costs the collector less.
const leafHash = (record) => oneShot("\u0000" + record, "latin1");
// A node's input, 0x01 and its children, written into one buffer (single-threaded, so shared).
const nodeInput = Buffer.alloc(65, 1);
const nodeHash = (left, right) => {
  nodeInput.latin1Write(left, 1, 32);
  nodeInput.latin1Write(right, 33, 32);
  return oneShot(nodeInput, "latin1");
};
const binaryOfDigest = (digest) => Buffer.from(digest.slice(PREFIX.length), "hex").toString("latin1");
const digestOfBinary = (binary) => PREFIX + Buffer.from(binary, "latin1").toString("hex");

function merkleRoot(leaves) {
  if (leaves.length === 0) return oneShot("", "latin1");
  let level = leaves;
  while (level.length > 1) {
    const next = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(nodeHash(level[i], level[i + 1]));
    if (level.length % 2) next.push(level[level.length - 1]);
    level = next;
  }
  return level[0];
}

// RFC 9162, section 2.1.4.2: the new tree's root implied by a consistency proof, or null.
function rootFromConsistency(oldSize, oldRoot, newSize, proof) {
  if (oldSize === 0 || newSize < oldSize) return null;
  if (oldSize === newSize) return proof.length === 0 ? oldRoot : null;
  if (proof.length === 0 || oldRoot.length !== 32 || proof.some((p) => p.length !== 32)) return null;
  const path = [...proof];
  if ((oldSize & (oldSize - 1)) === 0) path.unshift(oldRoot);
  let fn = oldSize - 1;
  let sn = newSize - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && fr === oldRoot ? sr : null;
}

// A case record (app/digest/merkle.py, case_record): written key by key in canonical order, of a case
// caseProblem accepted. The example id and evidence refs are written by JSON.stringify, as
// RFC 8785 writes them (a lone surrogate was refused before the line was parsed); the rest need
// no escaping: a status and an assurance level are words, digests are lower-case hex, a repeat
// is an integer and a score a finite number, which String writes as JSON.stringify does.
function caseRecord(value) {
  const trace = value.trace_ref === undefined ? null : value.trace_ref.digest;
  const quoted = (text) => (text === null ? "null" : '"' + text + '"');
  return '{"assurance":"' + value.assurance + '","evidence_refs":' +
    (value.evidence_refs.length ? JSON.stringify(value.evidence_refs) : "[]") +
    ',"example_id":' + JSON.stringify(value.example_id) + measuresMember(value.measures) +
    ',"output_digest":' + quoted(value.output_digest) + ',"repeat":' + String(value.repeat) +
    ',"score":' + String(value.score) + ',"scorer_digest":"' + value.scorer_digest +
    '","status":"' + value.status + '","trace_digest":' + quoted(trace) + "}";
}

// A case's measures as the member its record carries after the example id, only when it has
// some (app/digest/merkle.py, measures_text): names are identifiers, so the default sort is
// RFC 8785's order, and String writes a finite number as JSON.stringify does.
function measuresMember(measures) {
  const names = measures === undefined ? [] : Object.keys(measures).sort();
  if (!names.length) return "";
  return ',"measures":{' + names.map((name) => '"' + name + '":' + String(measures[name])).join(",") + "}";
}

// ---- before parsing: encoding and limits --------------------------------------------------
// The same exact scans as app/bundles/lexical.py, so that no parser's leniency decides what a
// line means. The number scan runs on every line JSON.parse refuses and on every line whose
// parsed value holds a number that is not finite or beyond ±(2^53 − 1): any number token out
// of range gives one or the other.

const SURROGATE_HINT = /\\u[dD][89a-fA-F]/;
const TOKEN = /"[^"\\]*(?:\\.[^"\\]*)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|[[\]{}]/gs;
const ESCAPE = /\\(u[0-9a-fA-F]{4}|.)/gs;

function surrogateEscape(bytes) {
  for (const [token] of bytes.matchAll(TOKEN)) {
    if (token[0] !== '"') continue;
    for (const escape of token.slice(1, -1).matchAll(ESCAPE)) {
      const code = escape[1];
      if (code[0] === "u") {
        const n = parseInt(code.slice(1), 16);
        if (n >= 0xd800 && n <= 0xdfff) return true;
      }
    }
  }
  return false;
}

function tooDeep(bytes) {
  let depth = 0;
  for (const [token] of bytes.matchAll(TOKEN)) {
    if (token === "[" || token === "{") {
      depth += 1;
      if (depth > MAX_DEPTH) return true;
    } else if (token === "]" || token === "}") {
      depth -= 1;
    }
  }
  return false;
}

function numberProblem(bytes) {
  for (const [token] of bytes.matchAll(TOKEN)) {
    if (token[0] === '"' || "[]{}".includes(token)) continue;
    if (!/[.eE]/.test(token)) {
      const n = BigInt(token);
      if ((n < 0n ? -n : n) > MAX_SAFE) return `an integer beyond ±(2^53 − 1): ${token.slice(0, 40)}`;
    } else if (!Number.isFinite(Number(token))) {
      return `a number beyond the double range: ${token.slice(0, 40)}`;
    }
  }
  return null;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
// buffer.isAscii came with Node.js 18.15; before it, every line is decoded as UTF-8.
const isAscii = typeof nodeBuffer.isAscii === "function" ? nodeBuffer.isAscii : () => false;
const hasBom = (data) => data.length >= 3 && data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf;

function openings(text, limit) {
  let n = 0;
  for (const bracket of ["[", "{"]) {
    for (let i = text.indexOf(bracket); i !== -1 && n <= limit; i = text.indexOf(bracket, i + 1)) n += 1;
  }
  return n;
}

// [problem, text]: the problem ([code, what]) of a line refused before parsing, else null,
// and the line's text once it is known to be UTF-8. The scans run on the text: every pattern
// is ASCII, and a character outside ASCII reads like the bytes that encode it.
function lineProblem(data) {
  if (hasBom(data)) return [["encoding", "a UTF-8 byte order mark"], null];
  let text;
  try {
    // An ASCII line reads the same as Latin-1, which needs no decoding.
    text = isAscii(data) ? data.toString("latin1") : utf8.decode(data);
  } catch {
    return [["encoding", "not UTF-8"], null];
  }
  if (text.includes("\\u") && SURROGATE_HINT.test(text) && surrogateEscape(text)) {
    return [["encoding", "a \\u escape of a UTF-16 surrogate"], text];
  }
  if (openings(text, MAX_DEPTH) > MAX_DEPTH && tooDeep(text)) return [["limits", `nesting deeper than ${MAX_DEPTH}`], text];
  return [null, text];
}

// ---- what each line and item may hold (app/bundles/format.py, shapes.py, fields.py) --------

// The table's types (app/bundles/shapes.py reads them the same way), each compiled once into
// a predicate: the case lines' checks run once a line.
const IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$/;
const MAX_MEASURES = 16;
// A case's measures (app/domain/measures.py): at most 16 identifiers, each a finite number >= 0.
const isMeasures = (v) => isObject(v) && Object.keys(v).length <= MAX_MEASURES &&
  Object.entries(v).every(([name, n]) => IDENTIFIER.test(name) && typeof n === "number" && Number.isFinite(n) && n >= 0);
const SCALARS = {
  string: isString, digest: isDigest, integer: isInteger, number: (v) => typeof v === "number",
  boolean: (v) => typeof v === "boolean", any: () => true, measures: isMeasures,
};
const fieldOf = (value, name) => (Object.hasOwn(value, name) ? value[name] : null);

function compiled(type) {
  const scalar = SCALARS[type.type];
  if (scalar !== undefined) return scalar;
  switch (type.type) {
    case "nullable": {
      const of = compiled(type.of);
      return (v) => v === null || of(v);
    }
    case "list": {
      const of = compiled(type.of);
      return (v) => Array.isArray(v) && v.every(of);
    }
    case "one_of": {
      const values = new Set(type.values);
      return (v) => values.has(v);
    }
    case "object": {
      const keys = Object.keys(type.fields).sort();
      const fields = Object.entries(type.fields).map(([name, field]) => [name, compiled(field), type.may_omit.includes(name)]);
      return (v) => isObject(v) && (!type.exact || sameKeys(v, keys)) &&
        fields.every(([name, test, mayOmit]) => (mayOmit && !Object.hasOwn(v, name)) || test(fieldOf(v, name)));
    }
    default: {
      const problem = shapeProblemOf(type);
      return (v) => problem(v) === null;
    }
  }
}

// What is wrong with a value as a shape (its first broken rule, or null), compiled.
function shapeProblemOf(type) {
  const rules = type.rules.map(([name, field, message, mayOmit]) => [name, compiled(field), message, mayOmit !== undefined]);
  return (value) => {
    if (!isObject(value)) return type.message;
    for (const [name, test, message, mayOmit] of rules) {
      if (mayOmit && !Object.hasOwn(value, name)) continue;
      if (!test(fieldOf(value, name))) return message;
    }
    return null;
  };
}

// Each kind's checks, one entry a field: [name, failure (or null: the shape names it), test].
const KIND_CHECKS = Object.fromEntries(Object.entries(KINDS).map(([kind, spec]) => [kind,
  spec.checks.flatMap(([names, message]) => names.map((name) => {
    const type = FIELD_TYPES[kind][name];
    return [name, message, message === null ? shapeProblemOf(type) : compiled(type)];
  }))]));

// The failure a line's first broken check names (a field it may leave out only when there).
export function checksProblem(kind, value) {
  for (const [name, message, test] of KIND_CHECKS[kind]) {
    if (!Object.hasOwn(value, name)) continue;
    if (message === null) {
      const found = test(value[name]);
      if (found !== null) return found;
    } else if (!test(value[name])) {
      return message;
    }
  }
  return null;
}

const caseProblem = (value) => checksProblem("case", value);
const shapeProblem = (kind, value) => (KINDS[kind].checked === "later" ? null : checksProblem(kind, value));

function itemProblem(kind, item) {
  if (!isObject(item) || !["what", "ref", "reason"].every((k) => Object.hasOwn(item, k))) {
    return `a ${kind} item without what, ref and reason`;
  }
  const allowed = isString(item.reason) ? ITEM_WHAT[`${kind} ${item.reason}`] : undefined;
  if (allowed === undefined) return `a ${kind} item's reason`;
  const what = item.what;
  if (!allowed.includes(what)) return `a ${kind} item of reason ${item.reason} names ${what}`;
  const extra = new Set(Object.keys(item).filter((k) => !["what", "ref", "reason", ...ITEM_EXTRA[what]].includes(k)));
  if (item.reason === "stored_at_sso") {
    extra.delete("object_key");
    if (!isString(item.object_key)) return "a stored_at_sso item gives the object_key";
  }
  if (extra.size) return `a ${kind} item with unknown fields`;
  const ref = item.ref;
  if (!isObject(ref) || !sameKeys(ref, REF_FIELDS[what])) return `a ${what} item's ref has exactly ${REF_FIELDS[what].join(", ")}`;
  for (const name of REF_FIELDS[what]) {
    if (name === "repeat" ? !isInteger(ref[name]) : !isString(ref[name])) return `a ${what} item's ref.${name}`;
  }
  const kinds = what === "label_notes" ? ["label", "baseline_label"] : ["case", "baseline_case"];
  if (Object.hasOwn(ref, "kind") && !kinds.includes(ref.kind)) return `a ${what} item's ref.kind`;
  if (ITEM_EXTRA[what].includes("count") && (!isInteger(item.count) || item.count < 1)) return `a ${what} item's count`;
  if (what === "case_output" && !isDigest(item.digest)) return "a case_output item's digest";
  if (what === "cases") {
    const proof = Object.hasOwn(item, "consistency_proof") ? item.consistency_proof : [];
    if (!Array.isArray(proof) || !proof.every(isDigest)) return "a cases item's consistency_proof is a list of digests";
    for (const end of ["first", "last"]) {
      const bound = Object.hasOwn(item, end) ? item[end] : { example_id: "", repeat: 0 };
      if (!isObject(bound) || !sameKeys(bound, ["example_id", "repeat"]) || !isString(bound.example_id) || !isInteger(bound.repeat)) {
        return `a cases item's ${end} is {example_id, repeat}`;
      }
    }
  }
  return null;
}

function keyProblem(entry) {
  if (!isObject(entry) || !sameKeys(entry, KEY_FIELDS)) return "a key entry has keyid, alg, public_key, status, created_at, retired_at";
  const raw = strictBase64(entry.public_key);
  if (entry.alg !== "ed25519" || raw === null || raw.length !== 32) return "a key entry's public_key is base64 of 32 Ed25519 bytes";
  if (entry.keyid !== hexDigest(sha256().update(raw).digest())) return "a key entry's keyid is not the sha256 of its public key";
  return null;
}

// ---- reading ----------------------------------------------------------------------------

function firstHeader(path) {
  const head = Buffer.alloc(10);
  const handle = openSync(path, "r");
  let read;
  try {
    read = readSync(handle, head, 0, 10, 0);
  } finally {
    closeSync(handle);
  }
  if (read < 3 || head[0] !== 0x1f || head[1] !== 0x8b || head[2] !== 0x08) throw new NotABundle("not a gzip stream");
  if (read < 10) throw new GzipDamage("gzip", "the first gzip header is cut short");
  if (head[3] & 0xe2) throw new GzipDamage("gzip", "the first gzip header sets reserved flags or a header CRC");
}

// The compressed bytes read at once: zlib holds one such block at a time.
const READ_BLOCK = 8 << 20;

// The lines of each decompressed chunk, as views of it (no copy); a line that spans chunks is
// copied into a buffer of its own, so that lines side by side in one buffer are always lines
// side by side in the stream (hashLine relies on it).
async function* readBatches(path, onBytes, readBlock = READ_BLOCK) {
  firstHeader(path);
  // A deep read-ahead: zlib inflates on the thread pool while this thread checks lines.
  const gunzip = createGunzip({ chunkSize: 1 << 20, readableHighWaterMark: 16 << 20 });
  // zlib goes on only when a callback of this thread's event loop hands it its next input,
  // and this thread turns the loop once a batch. A file stream piped in needed two more turns
  // at each of its 1 MB reads, in which zlib sat idle and the checks then waited for it. So
  // the file is read here, a block at a time, as soon as zlib has taken the last one.
  const fd = openSync(path, "r");
  const feed = () => {
    try {
      for (;;) {
        const block = Buffer.allocUnsafe(readBlock);
        const read = readSync(fd, block, 0, readBlock, null);
        if (read === 0) {
          gunzip.end();
          return;
        }
        if (onBytes) onBytes(read);
        if (!gunzip.write(read < readBlock ? block.subarray(0, read) : block)) return;
      }
    } catch (error) {
      gunzip.destroy(error);
    }
  };
  gunzip.on("drain", feed);
  gunzip.on("close", () => closeSync(fd));
  feed();
  let pieces = [];
  try {
    for await (const chunk of gunzip) {
      const lines = [];
      let start = 0;
      let index = chunk.indexOf(10);
      if (pieces.length) {
        if (index === -1) {
          pieces.push(chunk);
          continue;
        }
        pieces.push(chunk.subarray(0, index));
        lines.push(joined(pieces));
        pieces = [];
        start = index + 1;
        index = chunk.indexOf(10, start);
      }
      while (index !== -1) {
        lines.push(chunk.subarray(start, index));
        start = index + 1;
        index = chunk.indexOf(10, start);
      }
      if (start < chunk.length) pieces.push(chunk.subarray(start));
      if (lines.length) yield lines;
    }
  } catch (error) {
    if (error.code === "Z_BUF_ERROR" || /unexpected end of file/.test(error.message)) {
      throw new GzipDamage("truncated", "the gzip stream is truncated");
    }
    if (HEADER_ERRORS.some((e) => error.message.includes(e))) {
      throw new GzipDamage("trailing_bytes", "bytes after the last gzip member");
    }
    if (error.code && error.code.startsWith("Z_")) throw new GzipDamage("gzip", `a damaged gzip member (${error.message})`);
    throw error;
  }
  // zlib stops quietly at bytes after the last member that start with a zero byte.
  if (gunzip.bytesWritten < statSync(path).size) throw new GzipDamage("trailing_bytes", "bytes after the last gzip member");
  if (pieces.length) yield [joined(pieces)];
}

// Pieces of one line copied into a buffer no other line shares.
function joined(pieces) {
  const length = pieces.reduce((total, piece) => total + piece.length, 0);
  const line = Buffer.allocUnsafeSlow(length);
  let at = 0;
  for (const piece of pieces) at += piece.copy(line, at);
  return line;
}

// ---- the verifier -----------------------------------------------------------------------

// Text hashed in pieces of about a megabyte (one hash update per piece, not per item).
class TextHash {
  constructor(start) {
    this.hash = sha256();
    this.text = start;
  }
  add(text) {
    this.text += text;
    if (this.text.length >= 1 << 20) {
      this.hash.update(this.text, "utf8");
      this.text = "";
    }
  }
  digest(end) {
    this.hash.update(this.text + end, "utf8");
    this.text = "";
    return PREFIX + this.hash.digest("hex");
  }
}

class Dataset {
  constructor(lineNo, fields) {
    this.lineNo = lineNo;
    this.fields = fields;
    this.hash = new TextHash('{"examples":[');
    this.count = 0;
    this.lastId = null;
  }
  add(id, bodyDigest, tags) {
    // Strings and a list of strings (shapeProblem checked them): JSON.stringify writes them as
    // RFC 8785 does, and the keys are written in their sorted order.
    this.hash.add((this.count ? "," : "") + '{"body_digest":' + JSON.stringify(bodyDigest) + ',"id":' +
      JSON.stringify(id) + ',"tags":' + JSON.stringify(tags) + "}");
    this.count += 1;
  }
  digest() {
    const tail = canonicalize({ name: this.fields.name, version: this.fields.version });
    return this.hash.digest("]," + tail.slice(1));
  }
}

class Evidence {
  constructor() {
    this.hash = new TextHash("[");
    this.entries = [];
    this.total = 0;
  }
  add(value) {
    if (value.output_digest) this.addEntry(value.output_digest);
    if (value.trace_ref) this.addEntry(value.trace_ref.digest);
    for (const ref of value.evidence_refs) this.addEntry(ref);
  }
  addEntry(entry) {
    this.hash.add((this.total ? "," : "") + JSON.stringify(entry));
    this.total += 1;
    if (this.entries.length <= 20) this.entries.push(entry);
  }
  digest() {
    return this.hash.digest("]");
  }
}

const NEWLINE = Buffer.from("\n");
const OUTPUT_KEY = Buffer.from('"output":');
const OUTPUT_FOLLOWER = Buffer.from(',"output_digest":');
const BODY_KEY = Buffer.from('"body":');
const BODY_FOLLOWER = Buffer.from(',"body_digest":');
const MANIFEST_KEY = Buffer.from('"manifest":');
const RESULT_FOLLOWER = Buffer.from(',"result":');
const key = (...parts) => JSON.stringify(parts);

// Each line kind's check, over the facts (function declarations are hoisted).
const LINE_CHECKS = {
  header: on_header,
  report: on_report,
  suite_version: on_suite_version,
  scorer_version: on_scorer_version,
  dataset_version: on_dataset_version,
  example: on_example,
  check: on_check,
  case: on_case,
  baseline_case: on_baseline_case,
  label: on_label,
  baseline_label: on_baseline_label,
  unavailable: on_unavailable,
  redacted: on_redacted,
  trailer: on_trailer,
};

// What a verification has found so far: the facts every check below reads and adds to.
class Facts {
  constructor(trustedKeys, requireTrust) {
    this.failures = [];
    this.proven = {};
    this.notProven = {};
    this.notABundle = null;
    this.trustedKeys = trustedKeys;
    this.requireTrust = requireTrust;
    this.bundleKeys = new Map();
    this.seen = new Set();
    this.reportLine = 0;
    this.attestation = null;
    this.supersessions = null;
    this.log = null;
    this.testResult = null;
    this.logPolicy = { logKey: null, witnessKeys: [], minWitnesses: 0 };
    this.logOutcome = null;
    this.logTree = null;
    this.signedStatements = [];
    this.envelope = null;
    this.status = "not proven";
    this.bodyDigest = "";
    this.signer = null;
    this.streamHash = sha256();
    this.runBuffer = null;
    this.runStart = 0;
    this.runEnd = 0;
    // The current line's bytes when they are canonical JSON, else null.
    this.line = null;
    this.phase = -1;
    this.header = {};
    this.body = {};
    this.suite = {};
    this.trailerSeen = false;
    this.pinned = new Map();
    this.scorerLines = new Set();
    this.dataset = null;
    this.datasets = new Set();
    this.absentBodies = [];
    this.check = null;
    this.checkLines = new Set();
    this.checkLineNumbers = new Map();
    this.evidence = new Map();
    this.lastCase = null;
    // Labels of judged checks (docs/judges.md): the last label read, each tree's leaves.
    this.lastLabel = null;
    this.labelLeaves = new Map();
    this.leaves = new Map();
    this.treeKind = null;
    this.treeCheck = null;
    this.tree = null;
    this.treeLeaves = null;
    this.tracedCounts = new Map();
    this.absentOutputs = new Map();
    this.items = { unavailable: [], redacted: [] };
    this.mayHoldBodies = true;
  }
}

// Lines are hashed a run at a time: a line that lies right after the run in the same buffer
// (one newline between them: readBatches gives a line that spans chunks a buffer of its own)
// extends the run, which is hashed as one view when a line breaks it or the trailer comes.
function hashLine(facts, data) {
  if (data.buffer === facts.runBuffer && data.byteOffset === facts.runEnd + 1) {
    facts.runEnd = data.byteOffset + data.length;
    return;
  }
  flushHash(facts);
  facts.runBuffer = data.buffer;
  facts.runStart = data.byteOffset;
  facts.runEnd = data.byteOffset + data.length;
}

function flushHash(facts) {
  if (facts.runBuffer === null) return;
  facts.streamHash.update(new Uint8Array(facts.runBuffer, facts.runStart, facts.runEnd - facts.runStart));
  facts.streamHash.update(NEWLINE);
  facts.runBuffer = null;
}

// The digest of a member's value: hashed from the line's bytes when the line is canonical (keys
// in order, the member followed by `follower`; a quote inside a string is escaped, so the
// key's first and the follower's last occurrence are the line's own, or the follower's first
// after the key when the caller knows none stands inside the member), else canonicalized.
function memberDigest(facts, key, follower, value, followerAfterKey = false) {
  const line = facts.line;
  if (line !== null) {
    const start = line.indexOf(key);
    const end = followerAfterKey ? line.indexOf(follower, start) : line.lastIndexOf(follower);
    if (start >= 0 && start < end) return PREFIX + oneShot(line.subarray(start + key.length, end), "hex");
  }
  return digestOf(value);
}

// A check's manifest digest, hashed from the line's bytes when the manifest is a list of
// strings and the line holds only its known fields: `result` then follows it, and a list of
// strings holds no `,"result":` outside its strings, so the first after the key ends it.
function manifestDigest(facts, value) {
  const manifest = value.manifest;
  const listed = Array.isArray(manifest) && manifest.every(isString) &&
    Object.keys(value).every((name) => ALLOWED.check.has(name));
  return listed ? memberDigest(facts, MANIFEST_KEY, RESULT_FOLLOWER, manifest, true) : digestOf(manifest);
}

function count(facts, table, what, n = 1) {
  table[what] = (table[what] || 0) + n;
}

function failAt(facts, lineNo, code, what, expected = null, actual = null) {
  facts.failures.push({ line: lineNo, code, what, expected: str(expected), actual: str(actual) });
}

function equal(facts, lineNo, code, what, expected, actual) {
  const same = expected === actual ||
    (expected !== null && actual !== null && typeof expected === "object" &&
      typeof actual === "object" && canonicalize(expected) === canonicalize(actual));
  if (same) {
    count(facts, facts.proven, code);
    return true;
  }
  failAt(facts, lineNo, code, what, expected, actual);
  return false;
}

function feed(facts, lineNo, raw) {
  if (facts.notABundle !== null) return;
  if (facts.trailerSeen) {
    failAt(facts, lineNo, "after_trailer", "a line after the trailer");
    return;
  }
  let data = raw;
  let [problem, text] = lineProblem(data);
  while (problem !== null && hasBom(data)) {
    failAt(facts, lineNo, ...problem);
    data = data.subarray(3);
    [problem, text] = lineProblem(data);
  }
  if (problem !== null) {
    if (lineNo === 1) {
      facts.notABundle = `line 1: ${problem[1]}`;
      return;
    }
    failAt(facts, lineNo, ...problem);
    hashLine(facts, raw);
    return;
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const outOfRange = numberProblem(text);
    if (lineNo === 1) {
      facts.notABundle = `line 1: ${outOfRange ?? `not JSON: ${error.message}`}`;
      return;
    }
    if (outOfRange !== null) failAt(facts, lineNo, "limits", outOfRange);
    else failAt(facts, lineNo, "not_json", `not JSON: ${error.message}`);
    hashLine(facts, raw);
    return;
  }
  const kind = isObject(value) ? value.kind : undefined;
  outOfRange = false;
  const canonical = isCanonical(value, text);
  facts.line = canonical ? data : null;
  const outside = outOfRange ? numberProblem(text) : null;
  if (outside !== null) {
    if (lineNo === 1) {
      facts.notABundle = `line 1: ${outside}`;
      return;
    }
    failAt(facts, lineNo, "limits", outside);
    hashLine(facts, raw);
    return;
  }
  if (lineNo === 1 && (kind !== "header" || value.format !== FORMAT)) {
    facts.notABundle = `line 1 is not a ${FORMAT} header`;
    return;
  }
  if (kind !== "trailer") hashLine(facts, raw);
  if (!isString(kind) || !Object.hasOwn(PHASES, kind)) {
    failAt(facts, lineNo, "unknown_kind", `unknown line kind ${JSON.stringify(kind ?? null)}`);
    return;
  }
  if (!canonical) {
    failAt(facts, lineNo, "not_canonical", `the ${kind} line is not canonical JSON`);
  }
  // Loops rather than filter: this runs for every line, and what it finds is rare.
  const allowed = ALLOWED[kind];
  const names = Object.keys(value);
  for (let i = 0; i < names.length; i++) {
    if (!allowed.has(names[i])) {
      const unknown = names.filter((name) => !allowed.has(name)).sort();
      failAt(facts, lineNo, "unknown_field", `the ${kind} line has unknown fields ${unknown.join(", ")}`);
      break;
    }
  }
  if (ONCE.has(kind)) {
    if (facts.seen.has(kind)) {
      failAt(facts, lineNo, "duplicate", `a second ${kind} line`);
      return;
    }
    facts.seen.add(kind);
  }
  const phase = PHASES[kind];
  if (phase < facts.phase) failAt(facts, lineNo, "order", `a ${kind} line out of the bundle's order`);
  else if (phase > facts.phase && (facts.phase === 4 || facts.phase === 5)) closeDataset(facts);
  facts.phase = Math.max(facts.phase, phase);
  const required = REQUIRED[kind];
  let missing = null;
  for (let i = 0; i < required.length; i++) {
    if (!Object.hasOwn(value, required[i])) {
      missing = required.filter((name) => !Object.hasOwn(value, name));
      break;
    }
  }
  if (missing !== null) {
    failAt(facts, lineNo, "malformed", `the ${kind} line lacks ${missing.join(", ")}`);
    if (kind === "trailer") facts.trailerSeen = true;
    return;
  }
  const mistyped = shapeProblem(kind, value);
  if (mistyped !== null) {
    failAt(facts, lineNo, "malformed", mistyped);
    return;
  }
  // No catch: the admission above refused what a check cannot read, so an exception here
  // is a bug, and it stops the run with its trace (as in the Python twin).
  LINE_CHECKS[kind](facts, lineNo, value);
}

function on_header(facts, lineNo, value) {
  facts.header = value;
  const permissions = value.exporter.permissions;
  facts.mayHoldBodies = permissions.includes("dataset.read_body") || permissions.includes("admin");
  const entries = Object.hasOwn(value, "keys") ? value.keys : [];
  if (!Array.isArray(entries)) {
    failAt(facts, lineNo, "keys", "the header's keys is a list");
    return;
  }
  for (const entry of entries) {
    const problem = keyProblem(entry);
    if (problem !== null) {
      failAt(facts, lineNo, "keys", problem);
      continue;
    }
    facts.bundleKeys.set(entry.keyid, Buffer.from(entry.public_key, "base64"));
  }
}

function on_report(facts, lineNo, value) {
  const body = (facts.body = value.body);
  facts.reportLine = lineNo;
  facts.attestation = value.attestation ?? null;
  facts.supersessions = value.supersessions ?? null;
  facts.log = value.log ?? null;
  facts.testResult = value.test_result ?? null;
  facts.envelope = value.envelope ?? null;
  const computed = (facts.bodyDigest = digestOf(body));
  equal(facts, lineNo, "report_digest", "the body's digest vs the line", value.digest, computed);
  equal(facts, lineNo, "report_digest", "the body's digest vs the header", facts.header.report_digest ?? null, computed);
  equal(facts, lineNo, "report_id", "the body's report_id vs the header", facts.header.report_id ?? null, body.report_id ?? null);
  const envelope = value.envelope;
  equal(facts, lineNo, "envelope", "envelope.expires_at vs the body's valid_until", body.valid_until ?? null, envelope.expires_at ?? null);
  const url = String(envelope.url ?? "");
  equal(facts, lineNo, "envelope", "envelope.url names the report", `.../reports/${body.report_id}`, ".../reports/" + url.split("/reports/").pop());
  const status = envelope.status;
  if (status === "current") {
    const superseded = ["superseded_by", "superseded_at", "superseded_reason"].map((k) => envelope[k] ?? null);
    equal(facts, lineNo, "envelope", "a current report's supersession fields", [null, null, null], superseded);
  } else if (status === "superseded") {
    equal(facts, lineNo, "envelope", "superseded_reason is a known reason", true,
      ["re_evaluation", "suite_version_activated"].includes(envelope.superseded_reason));
  } else {
    failAt(facts, lineNo, "envelope", "envelope.status", "current or superseded", status ?? null);
  }
}

function on_suite_version(facts, lineNo, value) {
  const content = (facts.suite = value.content);
  const computed = digestOf(content);
  equal(facts, lineNo, "suite_digest", "the suite content's digest vs the line", value.digest, computed);
  equal(facts, lineNo, "suite_digest", "the suite content's digest vs the body's suite_ref",
    (facts.body.suite_ref && facts.body.suite_ref.digest) ?? null, computed);
  for (const check of content.checks || []) {
    // The shape admits a check without a scorer (a measure check has none); a scorer check
    // without one is not as the service wrote it, and already fails the digest above.
    if (check.scorer === undefined || Object.hasOwn(check, "measure")) continue;
    facts.pinned.set(key(check.scorer.name, check.scorer.version), check.scorer.digest);
  }
}

function on_scorer_version(facts, lineNo, value) {
  const scorer = key(value.name, value.version);
  if (facts.scorerLines.has(scorer)) {
    failAt(facts, lineNo, "duplicate", `a second line for scorer ${value.name} ${value.version}`);
    return;
  }
  facts.scorerLines.add(scorer);
  const computed = digestOf({ name: value.name, version: value.version, definition: value.definition });
  equal(facts, lineNo, "scorer_digest", `scorer ${value.name} ${value.version} vs the line`, value.digest, computed);
  equal(facts, lineNo, "scorer_digest", `scorer ${value.name} ${value.version} vs the suite's pin`, facts.pinned.get(scorer) ?? null, computed);
}

function on_dataset_version(facts, lineNo, value) {
  closeDataset(facts);
  if (facts.datasets.has(value.digest)) {
    failAt(facts, lineNo, "duplicate", `a second line for dataset ${value.digest}`);
    return;
  }
  facts.dataset = new Dataset(lineNo, value);
  facts.datasets.add(value.digest);
}

function on_example(facts, lineNo, value) {
  const dataset = facts.dataset;
  if (dataset === null || value.dataset !== dataset.fields.digest) {
    failAt(facts, lineNo, "order", "an example outside its dataset version");
    return;
  }
  const id = Buffer.from(value.id, "utf8");
  if (dataset.lastId !== null && Buffer.compare(id, dataset.lastId) <= 0) {
    failAt(facts, lineNo, "order", `example ${pyQuote(value.id)} is not in id order`);
  }
  dataset.lastId = id;
  dataset.add(value.id, value.body_digest, value.tags);
  if (Object.hasOwn(value, "body")) {
    if (!facts.mayHoldBodies) {
      failAt(facts, lineNo, "body_without_permission", "an example body for an exporter without dataset.read_body");
    }
    const computed = memberDigest(facts, BODY_KEY, BODY_FOLLOWER, value.body);
    if (value.body_digest === computed) count(facts, facts.proven, "body_digest");
    else failAt(facts, lineNo, "body_digest", `example ${pyQuote(value.id)} body`, value.body_digest, computed);
  } else {
    facts.absentBodies.push([lineNo, value.dataset, value.id]);
  }
}

function closeDataset(facts) {
  const dataset = facts.dataset;
  facts.dataset = null;
  if (dataset === null) return;
  const { fields, lineNo } = dataset;
  equal(facts, lineNo, "dataset_count", `dataset ${fields.name} ${fields.version} example count`, fields.example_count, dataset.count);
  const computed = dataset.digest();
  equal(facts, lineNo, "dataset_digest", `dataset ${fields.name} ${fields.version} from its example lines`, fields.digest, computed);
  const ref = (facts.body.dataset_refs || []).findLast((r) => r.digest === computed);
  equal(facts, lineNo, "dataset_digest", `dataset ${fields.name} ${fields.version} vs the body's dataset_refs`, true,
    ref !== undefined && ref.name === fields.name && ref.version === fields.version);
}

function on_check(facts, lineNo, value) {
  const checkId = value.check_id;
  if (facts.checkLines.has(checkId)) {
    failAt(facts, lineNo, "duplicate", `a second check line for ${pyQuote(checkId)}`);
    return;
  }
  facts.check = value;
  facts.lastCase = null;
  facts.lastLabel = null;
  facts.checkLines.add(checkId);
  facts.checkLineNumbers.set(checkId, lineNo);
  const expected = (facts.body.checks || []).findLast((c) => c.check_id === checkId);
  if (expected === undefined) {
    failAt(facts, lineNo, "check_result", `check ${pyQuote(checkId)} is not in the report body`);
    return;
  }
  equal(facts, lineNo, "check_result", `check ${pyQuote(checkId)} vs the report body`, canonicalize(expected), canonicalize(value.result));
  if (expected.evidence_manifest) {
    if (value.manifest === undefined || value.manifest === null) {
      failAt(facts, lineNo, "manifest", `check ${pyQuote(checkId)} has evidence_manifest but no manifest`);
    } else {
      const refs = expected.evidence_refs;
      equal(facts, lineNo, "manifest", `check ${pyQuote(checkId)} manifest vs its evidence_refs`, refs.length ? refs[0] : null, manifestDigest(facts, value));
    }
  }
  facts.evidence.set(checkId, [lineNo, new Evidence()]);
}

function on_case(facts, lineNo, value) {
  anyCase(facts, lineNo, value, "case");
}

function on_baseline_case(facts, lineNo, value) {
  anyCase(facts, lineNo, value, "baseline_case");
}

function anyCase(facts, lineNo, value, kind) {
  const checkId = value.check_id;
  if (facts.check === null || checkId !== facts.check.check_id) {
    failAt(facts, lineNo, "order", `a ${kind} of ${pyQuote(checkId)} outside its check`);
    return;
  }
  const problem = caseProblem(value);
  if (problem !== null) {
    failAt(facts, lineNo, "malformed", `a ${kind} line: ${problem}`);
    return;
  }
  if (facts.lastLabel !== null) {
    failAt(facts, lineNo, "order", `a ${kind} of ${pyQuote(checkId)} after the check's labels`);
    return;
  }
  const position = [kind, Buffer.from(value.example_id, "utf8"), value.repeat];
  const last = facts.lastCase;
  if (last !== null && last[0] === "baseline_case" && kind === "case") {
    failAt(facts, lineNo, "order", "a case after the baseline's cases");
  } else if (last !== null && last[0] === kind) {
    const order = Buffer.compare(position[1], last[1]) || Math.sign(position[2] - last[2]);
    if (order <= 0) {
      failAt(facts, lineNo, order === 0 ? "duplicate" : "order", `${kind} ${pyQuote(value.example_id)}/${value.repeat} is not in case order`);
      return;
    }
  }
  facts.lastCase = position;
  const tree = treeOf(facts, kind, checkId);
  facts.treeLeaves.push(leafHash(caseRecord(value)));
  if (Object.hasOwn(value, "trace_ref")) facts.tracedCounts.set(tree, (facts.tracedCounts.get(tree) || 0) + 1);
  if (!Object.hasOwn(value, "output") && value.output_digest !== null) {
    facts.absentOutputs.set(key(kind, checkId, value.example_id, value.repeat), [lineNo, value.output_digest]);
  }
  if (kind === "case") {
    const evidence = facts.evidence.get(checkId);
    if (evidence === undefined) {
      // Its check line was refused (not in the body): as the Python twin says it.
      failAt(facts, lineNo, "malformed", `a case of check ${pyQuote(checkId)}, not in the body`);
      return;
    }
    evidence[1].add(value);
  }
  if (Object.hasOwn(value, "output")) {
    if (!facts.mayHoldBodies) {
      failAt(facts, lineNo, "body_without_permission", "a case output for an exporter without dataset.read_body");
    }
    // As `equal` does, without writing what it checked unless it fails (once a case).
    const expected = value.output_digest ?? null;
    const computed = memberDigest(facts, OUTPUT_KEY, OUTPUT_FOLLOWER, value.output);
    if (expected === computed) count(facts, facts.proven, "output_digest");
    else failAt(facts, lineNo, "output_digest", `${kind} ${checkId}/${value.example_id}/${value.repeat} output`, expected, computed);
  }
}

// ---- labels (app/bundles/label_checks.py) ------------------------------------------------

const SAMPLE_DOMAIN = "evalbook.label-sample.v1\u0000";
const COUNTING_ASSURANCE = "human_attested";
const LABEL_LEAF_FIELDS = ["check_id", "example_id", "label", "labeller", "assurance"];
const MAX_NOTE = 2000;

// docs/judges.md, section 2: the example's draw, the first 8 bytes of its sample hash over
// 2**64 (a BigInt to a Number rounds once, as Python's int / 2**64 does).
function sampleDraw(seed, checkId, exampleId) {
  const digest = createHash("sha256").update(Buffer.from(SAMPLE_DOMAIN + seed + "\u0000" + checkId + "\u0000" + exampleId, "utf8")).digest();
  return Number(digest.readBigUInt64BE(0)) / 2 ** 64;
}

function suiteCheck(facts, checkId) {
  return (facts.suite.checks || []).find((c) => isObject(c) && c.check_id === checkId);
}

function labelValueProblem(method, label, note) {
  if (method === "pass_rate" && label !== "pass" && label !== "fail") return "a pass_rate check's label is pass or fail";
  if (method === "mean" && (typeof label !== "number" || !Number.isFinite(label))) return "a mean check's label is a number";
  if (note !== undefined && (!isString(note) || pyLength(note) > MAX_NOTE)) return `a label's note is text of at most ${MAX_NOTE} characters`;
  return null;
}

function pyLength(text) {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

function on_label(facts, lineNo, value) {
  anyLabel(facts, lineNo, value, "label");
}

function on_baseline_label(facts, lineNo, value) {
  anyLabel(facts, lineNo, value, "baseline_label");
}

function labelPlaced(facts, lineNo, value, kind) {
  if (facts.check === null || value.check_id !== facts.check.check_id) {
    failAt(facts, lineNo, "order", `a ${kind} of ${pyQuote(value.check_id)} outside its check`);
    return false;
  }
  const last = facts.lastLabel;
  const position = Buffer.from(value.example_id, "utf8");
  if (last !== null && last[0] === "baseline_label" && kind === "label") {
    failAt(facts, lineNo, "order", "a label after the baseline's labels");
    return false;
  }
  if (last !== null && last[0] === kind) {
    const order = Buffer.compare(position, last[1]);
    if (order <= 0) {
      failAt(facts, lineNo, order === 0 ? "duplicate" : "order", `${kind} ${pyQuote(value.example_id)} is not in example order`);
      return false;
    }
  }
  return true;
}

function anyLabel(facts, lineNo, value, kind) {
  if (!labelPlaced(facts, lineNo, value, kind)) return;
  const checkId = value.check_id;
  const exampleId = value.example_id;
  facts.lastLabel = [kind, Buffer.from(exampleId, "utf8")];
  const check = suiteCheck(facts, checkId);
  const calibration = check === undefined ? undefined : check.calibration;
  if (!isObject(calibration)) {
    failAt(facts, lineNo, "label", `a ${kind} on ${pyQuote(checkId)}, which is not judged`);
    return;
  }
  const method = isObject(check.aggregation) ? check.aggregation.method : undefined;
  const problem = labelValueProblem(method, value.label, value.note);
  if (problem !== null) {
    failAt(facts, lineNo, "malformed", `a ${kind} line: ${problem}`);
    return;
  }
  if (!(sampleDraw(calibration.sample_seed, checkId, exampleId) < calibration.label_fraction)) {
    failAt(facts, lineNo, "label_sample", `${kind} ${pyQuote(exampleId)} of ${pyQuote(checkId)} lies outside the check's label sample`);
    return;
  }
  if (ASSURANCE_LEVELS.indexOf(value.assurance) < ASSURANCE_LEVELS.indexOf(COUNTING_ASSURANCE)) {
    failAt(facts, lineNo, "label_assurance", `${kind} ${pyQuote(exampleId)} of ${pyQuote(checkId)} is ${value.assurance}, below ${COUNTING_ASSURANCE}: it cannot count`);
    return;
  }
  const bound = Object.fromEntries(LABEL_LEAF_FIELDS.map((name) => [name, value[name]]));
  const tree = key(kind, checkId);
  if (!facts.labelLeaves.has(tree)) facts.labelLeaves.set(tree, []);
  facts.labelLeaves.get(tree).push(leafHash(Buffer.from(write(bound), "utf8").toString("latin1")));
}

// Each judged check's labels (and its baseline's) against the roots its calibration commits to.
function settleLabels(facts) {
  for (const check of facts.body.checks) {
    const checkId = check.check_id;
    if (!facts.checkLineNumbers.has(checkId) || !Object.hasOwn(check, "calibration")) continue;
    const lineNo = facts.checkLineNumbers.get(checkId);
    const calibration = check.calibration;
    if (!isObject(calibration)) {
      failAt(facts, lineNo, "labels_root", `the calibration of ${pyQuote(checkId)} is malformed`);
      continue;
    }
    for (const [kind, name] of [["label", "labels_root"], ["baseline_label", "baseline_labels_root"]]) {
      const committed = Object.hasOwn(calibration, name) ? calibration[name] : null;
      const leaves = facts.labelLeaves.get(key(kind, checkId)) || [];
      if (committed === null && kind === "baseline_label" && leaves.length === 0) continue;
      equal(facts, lineNo, "labels_root", `${kind}s of ${pyQuote(checkId)}: the tree rebuilt from the lines vs the report's root`,
        committed, digestOfBinary(merkleRoot(leaves)));
    }
  }
}

// The key of a (kind, check) tree, and its leaves as this.treeLeaves: kept from the last case,
// since a check's cases come together.
function treeOf(facts, kind, checkId) {
  if (kind !== facts.treeKind || checkId !== facts.treeCheck) {
    facts.treeKind = kind;
    facts.treeCheck = checkId;
    facts.tree = key(kind, checkId);
    if (!facts.leaves.has(facts.tree)) facts.leaves.set(facts.tree, []);
    facts.treeLeaves = facts.leaves.get(facts.tree);
  }
  return facts.tree;
}

function on_unavailable(facts, lineNo, value) {
  onItems(facts, lineNo, value, "unavailable");
}

function on_redacted(facts, lineNo, value) {
  onItems(facts, lineNo, value, "redacted");
}

function onItems(facts, lineNo, value, kind) {
  if (!Array.isArray(value.items)) {
    failAt(facts, lineNo, "item", `the ${kind} line's items is a list`);
    return;
  }
  for (const item of value.items) {
    const problem = itemProblem(kind, item);
    if (problem !== null) {
      failAt(facts, lineNo, "item", problem);
      continue;
    }
    facts.items[kind].push({ ...item, line: lineNo });
    count(facts, facts.notProven, `${kind}: ${item.what} (${item.reason})`, item.count ?? 1);
  }
}

function on_trailer(facts, lineNo, value) {
  facts.trailerSeen = true;
  flushHash(facts);
  equal(facts, lineNo, "trailer_lines", "lines before the trailer", value.lines, lineNo - 1);
  equal(facts, lineNo, "trailer_sha256", "sha256 of the lines before the trailer", value.sha256, PREFIX + facts.streamHash.digest("hex"));
}

// ---- the end: presence, absences, trees, signature, evidence (app/bundles/settle.py) ----
function finish(facts, lastLine) {
  closeDataset(facts);
  if (!facts.trailerSeen) failAt(facts, lastLine, "no_trailer", `the stream ends at line ${lastLine} without a trailer`);
  if (isEmpty(facts.body) || isEmpty(facts.suite)) {
    failAt(facts, lastLine, "missing_line", "the report or suite_version line is missing");
    return;
  }
  for (const ref of facts.body.dataset_refs) {
    if (!facts.datasets.has(ref.digest)) failAt(facts, lastLine, "missing_line", `no dataset_version line for ${ref.name} ${ref.version}`);
  }
  for (const check of facts.body.checks) {
    if (!facts.checkLines.has(check.check_id)) failAt(facts, lastLine, "missing_line", `no check line for ${pyQuote(check.check_id)}`);
  }
  settleBaseline(facts);
  const byWhat = (what) => [...facts.items.unavailable, ...facts.items.redacted].filter((i) => i.what === what);
  explainScorers(facts, lastLine, byWhat("scorer_version"));
  explainBodies(facts, byWhat("example_body"), byWhat("example_bodies"));
  explainOutputs(facts, byWhat("case_output"), byWhat("case_outputs"));
  explainTraces(facts, lastLine, byWhat("trace_bodies"));
  const limits = caseLimits(facts, byWhat("cases"));
  settleTrees(facts, limits);
  settleLabels(facts);
  settleEvidence(facts, limits);
  settleSignature(facts);
  settleTestResult(facts);
  settleSupersessions(facts);
  settleLog(facts);
}

function once(facts, item, what, seen) {
  if (seen.has(what)) {
    failAt(facts, item.line, "item", `a second ${item.what} item for ${what}`);
    return false;
  }
  seen.add(what);
  return true;
}

function settleBaseline(facts) {
  const expected = facts.header.baseline_evaluation_id ?? null;
  for (const check of facts.body.checks) {
    for (const part of [check, ...(check.slices || [])]) {
      if (isObject(part.comparison)) {
        equal(facts, 1, "baseline", `the header's baseline_evaluation_id vs ${pyQuote(check.check_id)}'s comparison`,
          part.comparison.baseline_evaluation_id ?? null, expected);
      }
    }
  }
}

function explainScorers(facts, lastLine, items) {
  const explained = new Set();
  for (const item of items) {
    const scorer = key(item.ref.name, item.ref.version);
    if (!facts.pinned.has(scorer) || facts.pinned.get(scorer) !== item.ref.digest) {
      failAt(facts, item.line, "item", `scorer ${scorer} is not pinned by the suite`);
    } else if (facts.scorerLines.has(scorer)) {
      failAt(facts, item.line, "item", `scorer ${scorer} has a line: nothing is absent`);
    } else {
      once(facts, item, scorer, explained);
    }
  }
  for (const scorer of [...facts.pinned.keys()].sort()) {
    if (!facts.scorerLines.has(scorer) && !explained.has(scorer)) {
      const [name, version] = JSON.parse(scorer);
      failAt(facts, lastLine, "unexplained", `pinned scorer ${name} ${version} has no line and no unavailable item`);
    }
  }
}

function explainBodies(facts, removedItems, withheldItems) {
  const absent = new Set(facts.absentBodies.map(([, dataset, id]) => key(dataset, id)));
  const removed = new Set();
  for (const item of removedItems) {
    const example = key(item.ref.dataset, item.ref.example_id);
    if (!absent.has(example)) failAt(facts, item.line, "item", `example ${example} is not an example without body`);
    else once(facts, item, example, removed);
  }
  const left = new Map();
  for (const example of absent) {
    if (removed.has(example)) continue;
    const [dataset] = JSON.parse(example);
    left.set(dataset, (left.get(dataset) || 0) + 1);
  }
  const withheld = new Set();
  for (const item of withheldItems) {
    const dataset = item.ref.dataset;
    if (once(facts, item, dataset, withheld)) {
      equal(facts, item.line, "item", `dataset ${dataset}: bodies withheld`, left.get(dataset) || 0, item.count);
    }
  }
  for (const [lineNo, dataset, id] of facts.absentBodies) {
    if (!removed.has(key(dataset, id)) && !withheld.has(dataset)) {
      failAt(facts, lineNo, "unexplained", `example ${pyQuote(id)} has no body and no redacted or unavailable item`);
    } else {
      count(facts, facts.proven, "absent_body_explained");
    }
  }
}

function explainOutputs(facts, outputItems, withheldItems) {
  const absent = facts.absentOutputs;
  const explained = new Set();
  for (const item of outputItems) {
    const ref = item.ref;
    const output = key(ref.kind, ref.check_id, ref.example_id, ref.repeat);
    if (!absent.has(output)) failAt(facts, item.line, "item", `case ${output} is not a case without its output`);
    else if (absent.get(output)[1] !== item.digest) failAt(facts, item.line, "item", `case ${output}: its digest`, absent.get(output)[1], item.digest);
    else if (item.reason === "stored_at_sso" && !item.object_key.endsWith("/" + item.digest.slice(PREFIX.length) + ".json")) {
      failAt(facts, item.line, "item", `case ${output}: its object_key names another output`);
    } else once(facts, item, output, explained);
  }
  const left = new Map();
  for (const output of absent.keys()) {
    if (explained.has(output)) continue;
    const [kind, checkId] = JSON.parse(output);
    const pair = key(kind, checkId);
    left.set(pair, (left.get(pair) || 0) + 1);
  }
  const withheld = new Set();
  for (const item of withheldItems) {
    const pair = key(item.ref.kind, item.ref.check_id);
    if (once(facts, item, pair, withheld)) {
      equal(facts, item.line, "item", `${pair}: outputs withheld`, left.get(pair) || 0, item.count);
    }
  }
  for (const [output, [lineNo]] of absent) {
    const [kind, checkId, exampleId, repeat] = JSON.parse(output);
    if (!explained.has(output) && !withheld.has(key(kind, checkId))) {
      failAt(facts, lineNo, "unexplained", `${kind} ${checkId}/${exampleId}/${repeat} has no output and no item saying why`);
    } else {
      count(facts, facts.proven, "absent_output_explained");
    }
  }
}

function explainTraces(facts, lastLine, items) {
  const explained = new Set();
  for (const item of items) {
    const pair = key(item.ref.kind, item.ref.check_id);
    if (once(facts, item, pair, explained)) {
      equal(facts, item.line, "item", `${pair} with trace refs`, facts.tracedCounts.get(pair) || 0, item.count);
    }
  }
  for (const pair of [...facts.tracedCounts.keys()].sort()) {
    if (!explained.has(pair)) {
      const [kind, checkId] = JSON.parse(pair);
      failAt(facts, lastLine, "unexplained", `${kind}s of ${pyQuote(checkId)} carry trace refs but no trace_bodies item`);
    }
  }
}

function caseLimits(facts, items) {
  const limits = new Map();
  const seen = new Set();
  for (const item of items) {
    const pair = key(item.ref.kind, item.ref.check_id);
    if (!facts.checkLineNumbers.has(item.ref.check_id)) failAt(facts, item.line, "item", `a case_limit item for a check with no line ${pair}`);
    else if (once(facts, item, pair, seen)) limits.set(pair, item);
  }
  return limits;
}

function settleTree(facts, kind, checkId, committed, limit) {
  const lineNo = facts.checkLineNumbers.get(checkId);
  const leaves = facts.leaves.get(key(kind, checkId)) || [];
  const m = leaves.length;
  const what = `${kind}s of ${pyQuote(checkId)}`;
  if (!isObject(committed) || !Object.hasOwn(committed, "count") || !Object.hasOwn(committed, "root") ||
      !isInteger(committed.count) || !isDigest(committed.root)) {
    failAt(facts, lineNo, "cases_root", `the report's tree of the ${what} is malformed`);
    return;
  }
  const n = committed.count;
  if (limit === undefined) {
    if (m !== n) {
      failAt(facts, lineNo, "cases_root", `${what}: lines vs the report's count`, n, m);
      return;
    }
    equal(facts, lineNo, "cases_root", `${what}: the tree rebuilt from the lines vs the report's root`, committed.root, digestOfBinary(merkleRoot(leaves)));
    return;
  }
  if (limit.count !== n - m) {
    failAt(facts, limit.line, "item", `${what}: the case_limit count`, n - m, limit.count);
    return;
  }
  if (m === 0) {
    // No line kept: nothing for a proof to bind, so the proof must be empty.
    if ((limit.consistency_proof || []).length) failAt(facts, limit.line, "item", `${what}: a case_limit with no line kept carries a proof`);
    return;
  }
  const proof = (limit.consistency_proof || []).map(binaryOfDigest);
  const implied = rootFromConsistency(m, merkleRoot(leaves), n, proof);
  equal(facts, lineNo, "cases_root", `${what}: the ${m} lines and the consistency proof vs the report's root`,
    committed.root, implied === null ? null : digestOfBinary(implied));
}

// A measure check's cases are those of the check it measures: its trees must be that check's
// (app/bundles/trees.py, _settle_measured).
function settleMeasured(facts, check) {
  const checkId = check.check_id;
  const of = isObject(check.measure) ? (check.measure.of ?? null) : null;
  const source = facts.body.checks.find((c) => isObject(c) && c.check_id === of);
  const lineNo = facts.checkLineNumbers.get(checkId);
  if (source === undefined || Object.hasOwn(source, "measure")) {
    failAt(facts, lineNo, "cases_root", `${pyQuote(checkId)} measures no scored check of the body`);
    return;
  }
  equal(facts, lineNo, "cases_root", `${pyQuote(checkId)} measures ${pyQuote(of)}: its cases tree vs that check's`,
    source.cases ?? null, check.cases ?? null);
  if (isObject(check.comparison)) {
    equal(facts, lineNo, "cases_root", `${pyQuote(checkId)} measures ${pyQuote(of)}: its baseline's cases tree vs that check's`,
      isObject(source.comparison) ? (source.comparison.baseline_cases ?? null) : null, check.comparison.baseline_cases ?? null);
  }
}

function settleTrees(facts, limits) {
  for (const check of facts.body.checks) {
    const checkId = check.check_id;
    if (!facts.checkLineNumbers.has(checkId)) continue;
    if (Object.hasOwn(check, "measure")) {
      settleMeasured(facts, check);
      continue;
    }
    if (!Object.hasOwn(check, "cases")) {
      const n = (facts.leaves.get(key("case", checkId)) || []).length + (facts.leaves.get(key("baseline_case", checkId)) || []).length;
      if (n) count(facts, facts.notProven, PREDATES, n);
      continue;
    }
    settleTree(facts, "case", checkId, check.cases, limits.get(key("case", checkId)));
    const committed = isObject(check.comparison) ? (check.comparison.baseline_cases ?? null) : null;
    if (committed === null) {
      if ((facts.leaves.get(key("baseline_case", checkId)) || []).length) {
        failAt(facts, facts.checkLineNumbers.get(checkId), "baseline", `baseline cases of ${pyQuote(checkId)}, which the report compares with none`);
      }
      continue;
    }
    settleTree(facts, "baseline_case", checkId, committed, limits.get(key("baseline_case", checkId)));
  }
}

function settleEvidence(facts, limits) {
  const bodyChecks = new Map(facts.body.checks.map((c) => [c.check_id, c]));
  for (const [checkId, [lineNo, rebuilt]] of facts.evidence) {
    if (limits.has(key("case", checkId)) || !bodyChecks.has(checkId)) continue;
    const check = bodyChecks.get(checkId);
    const refs = check.evidence_refs || [];
    if (check.evidence_manifest) {
      equal(facts, lineNo, "evidence", `check ${pyQuote(checkId)} evidence rebuilt from its cases vs the manifest`, refs.length ? refs[0] : null, rebuilt.digest());
    } else {
      equal(facts, lineNo, "evidence", `check ${pyQuote(checkId)} evidence rebuilt from its cases`, refs, rebuilt.entries);
    }
  }
}

function settleSignature(facts) {
  const lineNo = facts.reportLine;
  const envelope = facts.attestation;
  // A key given is a key required: --key or --keys means "signed by this key" (cosign's rule).
  const given = [...facts.trustedKeys.keys()].sort();
  if (envelope === null) {
    count(facts, facts.notProven, NO_ATTESTATION);
    if (given.length) failAt(facts, lineNo, "unsigned", `the report carries no attestation; a signature by ${namedKeys(given)} was required`);
    else if (facts.requireTrust) failAt(facts, lineNo, "untrusted", "--require-trust: the report is not signed");
    return;
  }
  const problem = envelopeProblem(envelope);
  if (problem !== null) {
    failAt(facts, lineNo, "attestation", problem);
    return;
  }
  const payload = Buffer.from(envelope.payload, "base64");
  const expected = reportStatement(facts.body, facts.bodyDigest);
  if (expected === null || !payload.equals(expected)) {
    failAt(facts, lineNo, "attestation", "the signed statement is not this report's");
    return;
  }
  const message = pae(PAYLOAD_TYPE, payload);
  let signer = null;
  let known = false;
  for (const signature of envelope.signatures) {
    const kid = signature.keyid;
    for (const [keys, trusted] of [[facts.trustedKeys, true], [facts.bundleKeys, false]]) {
      const raw = keys.get(kid);
      if (raw === undefined) continue;
      known = true;
      if (!ed25519Verifies(raw, Buffer.from(signature.sig, "base64"), message)) {
        failAt(facts, lineNo, "signature", `the signature by ${kid} does not verify`);
      } else if (signer === null || (trusted && !signer.trusted)) {
        signer = { keyid: kid, trusted };
      }
      break;
    }
  }
  if (!known) failAt(facts, lineNo, "signature", "signed by no key given and none in the bundle");
  if (signer === null) return;
  count(facts, facts.proven, "signature");
  facts.signer = signer;
  if (signer.trusted) return;
  if (given.length) failAt(facts, lineNo, "untrusted", `signed by ${signer.keyid}, not by ${namedKeys(given)} (given)`);
  else if (facts.requireTrust) failAt(facts, lineNo, "untrusted", `--require-trust: ${signer.keyid} is not a trusted key`);
}


// ---- the transparency log (C2SP signed notes, checkpoints and cosignatures; RFC 9162) ------

const NO_LOG = "log: no transparency log entry (issued before the log)";
const NOT_COVERED = "log: no checkpoint covered the entry when exported";
const LOG_FIELDS = new Set(["entry", "index", "checkpoint", "inclusion_proof", "key", "newest", "supersessions"]);
const CURRENT = "current when exported";
const UNPROVEN_CURRENT = "status: current when exported is not proven offline (a bundle cannot show that no supersession was logged after it; --log URL scans the log)";
const NOTE_DASH = "\u2014 ";

class NoteError extends Error {}

function noteKeyHash(name, alg, publicKey) {
  return createHash("sha256").update(Buffer.concat([Buffer.from(name + "\n", "utf8"), Buffer.from([alg]), publicKey])).digest().subarray(0, 4);
}

/** A C2SP verifier key `<name>+<hash hex>+<base64(alg || key)>`: {name, alg, publicKey, hash}. */
export function parseVkey(text) {
  const parts = text.trim().split("+");
  if (parts.length < 3) throw new NoteError(`not a verifier key: ${text.slice(0, 80)}`);
  const [name, hashHex] = parts;
  const key = strictBase64(parts.slice(2).join("+"));
  if (!name || key === null || key.length !== 33 || (key[0] !== 1 && key[0] !== 4)) throw new NoteError(`not an Ed25519 verifier key: ${text.slice(0, 80)}`);
  const verifier = { name, alg: key[0], publicKey: key.subarray(1) };
  verifier.hash = noteKeyHash(name, verifier.alg, verifier.publicKey);
  if (verifier.hash.toString("hex") !== hashHex) throw new NoteError(`the key hash of '${name}' does not match its key`);
  return verifier;
}

function splitNote(note) {
  const at = note.lastIndexOf("\n\n");
  if (at < 0 || !note.endsWith("\n")) throw new NoteError("a note is its text, a blank line and its signatures");
  const text = note.slice(0, at + 1);
  const signatures = [];
  for (const line of note.slice(at + 2, -1).split("\n")) {
    if (!line.startsWith(NOTE_DASH)) throw new NoteError(`not a signature line: ${line.slice(0, 80)}`);
    const rest = line.slice(NOTE_DASH.length);
    const space = rest.lastIndexOf(" ");
    const data = strictBase64(rest.slice(space + 1));
    if (space <= 0 || data === null || data.length < 4) throw new NoteError("a signature line names its key and carries its key hash");
    signatures.push({ name: rest.slice(0, space), data });
  }
  return { text, signatures };
}

function openNote(note, verifier) {
  const { text, signatures } = splitNote(note);
  let valid = false;
  for (const s of signatures) {
    if (s.name !== verifier.name || !s.data.subarray(0, 4).equals(verifier.hash)) continue;
    // A bad line under the log's own name and key id beside a good one is a forgery, as Go's note.Open says.
    if (!ed25519Verifies(verifier.publicKey, s.data.subarray(4), Buffer.from(text, "utf8"))) throw new NoteError(`a signature under '${verifier.name}' and its key id does not verify`);
    valid = true;
  }
  if (!valid) throw new NoteError(`no valid signature of '${verifier.name}' on the note`);
  return text;
}

function cosignatureVerifies(text, signature, witness) {
  const data = signature.data;
  if (witness.alg !== 4 || signature.name !== witness.name || data.length !== 76 || !data.subarray(0, 4).equals(witness.hash)) return false;
  const time = data.readBigUInt64BE(4);
  return ed25519Verifies(witness.publicKey, data.subarray(12), Buffer.from(`cosignature/v1\ntime ${time}\n${text}`, "utf8"));
}

/** The newest checkpoint a bundle carries, or why it does not extend the witnessed one. */
function newestProblem(log, policy, witnessed) {
  let stated;
  let proof;
  try {
    const key = policy.logKey !== null ? policy.logKey : parseVkey(log.key);
    stated = parseCheckpoint(openNote(log.newest.checkpoint, key));
    proof = log.newest.consistency_proof.map((p) => strictBase64(p));
    if (proof.some((p) => p === null || p.length !== 32)) throw new NoteError("a proof's hash is 32 bytes of base64");
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    return { problem: `the newest checkpoint is malformed or not the log's: ${error.message}`, stated: null };
  }
  if (stated.origin !== witnessed.origin || stated.size <= witnessed.size) return { problem: "the newest checkpoint is not a later one of the same log", stated: null };
  const root = rootFromConsistency(witnessed.size, witnessed.root, stated.size, proof.map((p) => p.toString("latin1")));
  if (root !== stated.root) return { problem: "the newest checkpoint is not consistent with the witnessed one", stated: null };
  return { problem: null, stated };
}

function parseCheckpoint(text) {
  const lines = text.split("\n");
  if (lines.length < 4 || lines[lines.length - 1] !== "" || !lines[0] || !/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new NoteError("a checkpoint is an origin, a size and a root, each on a line");
  const root = strictBase64(lines[2]);
  if (root === null || root.length !== 32) throw new NoteError("a checkpoint's root hash is 32 bytes of base64");
  return { origin: lines[0], size: Number(lines[1]), root: root.toString("latin1") };
}

// RFC 9162, section 2.1.3.2: the root an inclusion proof leads to, or null.
function rootFromInclusion(index, size, leaf, proof) {
  if (index >= size) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

function logShapeProblem(log) {
  const keys = isObject(log) ? Object.keys(log) : null;
  if (keys === null || keys.some((k) => !LOG_FIELDS.has(k)) || !("entry" in log) || !("index" in log)) return "the report line's log is {entry, index, checkpoint, inclusion_proof, key}";
  if (!isObject(log.entry) || !Number.isInteger(log.index) || log.index < 0) return "the log's entry is an object and its index a whole number";
  const proof = log.inclusion_proof;
  if (log.checkpoint !== undefined && log.checkpoint !== null && (typeof log.checkpoint !== "string" || !Array.isArray(proof) || proof.some((p) => typeof p !== "string") || typeof log.key !== "string")) return "a covered entry carries its checkpoint, its proof and the log's key";
  const newest = log.newest;
  if (newest !== undefined && newest !== null) {
    const fields = isObject(newest) ? Object.keys(newest).sort().join(",") : "";
    if (fields !== "checkpoint,consistency_proof" || typeof newest.checkpoint !== "string" || !Array.isArray(newest.consistency_proof) || newest.consistency_proof.some((p) => typeof p !== "string") || log.checkpoint === undefined || log.checkpoint === null) return "the log's newest is {checkpoint, consistency_proof} beside a covered entry";
  }
  return supersessionsShapeProblem(log.supersessions);
}

/** The logged supersession entries: [{entry, index, inclusion_proof}], a proof or null. */
function supersessionsShapeProblem(items) {
  if (items === undefined || items === null) return null;
  const good = (item) => isObject(item) && Object.keys(item).sort().join(",") === "entry,inclusion_proof,index" && isObject(item.entry) && Number.isInteger(item.index) && item.index >= 0
    && (item.inclusion_proof === null || (Array.isArray(item.inclusion_proof) && item.inclusion_proof.every((p) => typeof p === "string")));
  if (!Array.isArray(items) || !items.every(good)) return "the log's supersessions are [{entry, index, inclusion_proof}]";
  return null;
}

/** How log entries name what they log (an attestation, a supersession statement): sha256 of
 * its canonical JSON (RFC 8785). */
const canonicalDigest = (value) => PREFIX + sha256().update(Buffer.from(canonicalize(value), "utf8")).digest("hex");

function logEntryProblem(facts, entry) {
  const body = isObject(facts.body) ? facts.body : {};
  if (entry.kind !== "report" || entry.report_id !== body.report_id) return "the log's entry does not name this report";
  if (entry.report_digest !== facts.bodyDigest) return "the log's entry names another report digest";
  if (facts.attestation !== null) {
    const digest = canonicalDigest(facts.attestation);
    if (entry.attestation_digest !== digest) return "the log's entry names another attestation";
  }
  return null;
}

/** The report's place in the transparency log, its checkpoint and the witnesses' cosignatures. */
function settleLog(facts) {
  const lineNo = facts.reportLine;
  const log = facts.log;
  const policy = facts.logPolicy;
  const demanded = policy.logKey !== null || policy.minWitnesses > 0;
  if (log === null) {
    if (demanded) failAt(facts, lineNo, "log", "the report carries no transparency log entry");
    else count(facts, facts.notProven, NO_LOG);
    return;
  }
  const problem = logShapeProblem(log) ?? logEntryProblem(facts, log.entry);
  if (problem !== null) {
    failAt(facts, lineNo, "log", problem);
    return;
  }
  if (log.checkpoint === undefined || log.checkpoint === null) {
    if (demanded) failAt(facts, lineNo, "log", "no checkpoint covered the entry when exported");
    else count(facts, facts.notProven, NOT_COVERED);
    return;
  }
  let text;
  let trusted = false;
  if (policy.logKey !== null) {
    try {
      text = openNote(log.checkpoint, policy.logKey);
      trusted = true;
    } catch (error) {
      if (!(error instanceof NoteError)) throw error;
      failAt(facts, lineNo, "untrusted", `the checkpoint is not signed by ${policy.logKey.name} (given)`);
      return;
    }
  } else {
    try {
      text = openNote(log.checkpoint, parseVkey(log.key));
    } catch (error) {
      if (!(error instanceof NoteError)) throw error;
      failAt(facts, lineNo, "log", `the checkpoint's signature does not verify: ${error.message}`);
      return;
    }
  }
  let stated;
  const proof = log.inclusion_proof.map((p) => strictBase64(p));
  try {
    stated = parseCheckpoint(text);
    if (proof.some((p) => p === null || p.length !== 32)) throw new NoteError("a proof's hash is 32 bytes of base64");
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    failAt(facts, lineNo, "log", `the checkpoint or the proof is malformed: ${error.message}`);
    return;
  }
  const leaf = leafHash(Buffer.from(canonicalize(log.entry), "utf8").toString("latin1"));
  const root = rootFromInclusion(log.index, stated.size, leaf, proof.map((p) => p.toString("latin1")));
  if (root !== stated.root) {
    failAt(facts, lineNo, "log", "the inclusion proof does not lead to the checkpoint's root");
    return;
  }
  const { signatures } = splitNote(log.checkpoint);
  const witnesses = policy.witnessKeys.filter((w) => signatures.some((s) => cosignatureVerifies(text, s, w))).length;
  if (witnesses < policy.minWitnesses) {
    failAt(facts, lineNo, "witnesses", `${witnesses} valid cosignature(s) by the given witnesses; --min-witnesses ${policy.minWitnesses}`);
    return;
  }
  let tree = { size: stated.size, root: stated.root };
  if (log.newest !== undefined && log.newest !== null) {
    const newest = newestProblem(log, policy, stated);
    if (newest.problem !== null) {
      failAt(facts, lineNo, "log", newest.problem);
      return;
    }
    tree = { size: newest.stated.size, root: newest.stated.root };
  }
  facts.logTree = tree;
  count(facts, facts.proven, "log");
  facts.logOutcome = { index: log.index, tree_size: stated.size, trusted, witnesses };
}

const sameJson = (a, b) => canonicalize(a === undefined ? null : a) === canonicalize(b === undefined ? null : b);

function supersessionEntryProblem(entry, predicate) {
  if (entry.kind !== "supersession") return "a supersession's log entry is of another kind";
  for (const name of ["superseded_report_id", "successor_report_id", "at"]) {
    if (!sameJson(entry[name], predicate[name])) return `a supersession's log entry names another ${name}`;
  }
  return null;
}

function includedIn(item, tree) {
  const proof = item.inclusion_proof.map((p) => strictBase64(p));
  if (proof.some((p) => p === null || p.length !== 32)) return false;
  const leaf = leafHash(Buffer.from(canonicalize(item.entry), "utf8").toString("latin1"));
  return rootFromInclusion(item.index, tree.size, leaf, proof.map((p) => p.toString("latin1"))) === tree.root;
}

/** Each signed supersession statement's logged entry, proven in the newest checkpoint the bundle
 * carries; with --log URL, that a current report was not superseded up to it. */
async function settleStatusLog(facts, scanUrl) {
  const lineNo = facts.reportLine;
  const tree = facts.logTree;
  if (tree === null || !isObject(facts.log)) return;
  const policy = facts.logPolicy;
  const demanded = policy.logKey !== null || policy.minWitnesses > 0;
  const logged = new Map();
  for (const item of facts.log.supersessions ?? []) logged.set(typeof item.entry.statement_digest === "string" ? item.entry.statement_digest : null, item);
  for (const { envelope, predicate } of facts.signedStatements) {
    const digest = canonicalDigest(envelope);
    const item = logged.get(digest);
    if (item === undefined) {
      failAt(facts, lineNo, "log", "a supersession statement has no entry in the log");
      continue;
    }
    logged.delete(digest);
    let problem = supersessionEntryProblem(item.entry, predicate);
    if (problem === null && item.index <= facts.log.index) problem = "a supersession is logged before the report it names";
    if (problem !== null) failAt(facts, lineNo, "log", problem);
    else if (item.inclusion_proof === null) {
      if (demanded) failAt(facts, lineNo, "log", "a supersession's entry was not yet in a checkpoint");
      else count(facts, facts.notProven, "log: a supersession's entry was not yet in a checkpoint");
    } else if (!includedIn(item, tree)) failAt(facts, lineNo, "log", "a supersession's inclusion proof does not lead to the root");
    else count(facts, facts.proven, "supersession_log");
  }
  // A statement carried but not proven (an untrusted key, say) is reported as such already.
  for (const envelope of Array.isArray(facts.supersessions) ? facts.supersessions : []) {
    try {
      logged.delete(canonicalDigest(envelope));
    } catch {
      // not canonical JSON: the statement's own check has said so
    }
  }
  if (logged.size > 0) failAt(facts, lineNo, "log", "a logged supersession the bundle carries no statement of");
  if (scanUrl !== null && scanUrl !== undefined) await scanLog(facts, scanUrl, tree);
  else if (facts.status === CURRENT) count(facts, facts.notProven, UNPROVEN_CURRENT);
}

/** --log URL: the served entries after the report's; a supersession of it the bundle leaves out
 * is a failure, none proves a current report current up to the tree. */
async function scanLog(facts, url, tree) {
  const lineNo = facts.reportLine;
  const reportId = isObject(facts.body) ? facts.body.report_id : undefined;
  let later;
  try {
    later = await entriesAfter(url, tree, facts.log.index);
  } catch (error) {
    if (!(error instanceof ScanError)) throw error;
    failAt(facts, lineNo, "log", `--log ${url}: ${error.message}`);
    return;
  }
  for (const [index, data] of later) {
    let entry;
    try {
      entry = JSON.parse(data.toString("utf8"));
    } catch {
      continue;
    }
    if (isObject(entry) && entry.kind === "supersession" && entry.superseded_report_id === reportId && facts.status === CURRENT) {
      failAt(facts, lineNo, "supersession", `the log holds a supersession of this report (entry ${index}) that the bundle leaves out`);
      return;
    }
  }
  if (facts.status === CURRENT) {
    count(facts, facts.proven, "current");
    facts.status = `${CURRENT} (proven in the log up to ${tree.size} entries)`;
  }
}

class ScanError extends Error {}

function tileIndexPath(n) {
  let digits = String(n).padStart(3, "0");
  digits = "0".repeat((3 - (digits.length % 3)) % 3) + digits;
  const groups = digits.match(/.../g);
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join("/");
}

function runRoot(hashes) {
  if (hashes.length === 1) return hashes[0];
  const split = 2 ** Math.floor(Math.log2(hashes.length - 1));
  return nodeHash(runRoot(hashes.slice(0, split)), runRoot(hashes.slice(split)));
}

/** [index, entry] of every entry after `index` in the tree the log at `base` serves, proven by
 * recomputing the tree's root from them and the hash tiles before them (C2SP tlog-tiles). */
async function entriesAfter(base, tree, index) {
  const root = base.replace(/\/+$/, "");
  const cache = new Map();
  const tile = async (level, n) => {
    const key = `${level}/${n}`;
    if (!cache.has(key)) {
      const held = Math.floor(tree.size / 2 ** (8 * Math.max(level, 0)));
      const width = Math.min(256, held - n * 256);
      const url = `${root}/tile/${level < 0 ? "entries" : level}/${tileIndexPath(n)}${width === 256 ? "" : `.p/${width}`}`;
      let answer;
      try {
        answer = await fetch(url, { headers: { "User-Agent": "evalbook-verify", "Accept-Encoding": "identity" }, signal: AbortSignal.timeout(60000) });
      } catch {
        throw new ScanError(`${url}: unreachable`);
      }
      if (!answer.ok) throw new ScanError(`${url}: HTTP ${answer.status}`);
      const data = Buffer.from(await answer.arrayBuffer());
      if (level >= 0 && data.length !== width * 32) throw new ScanError(`${url}: a tile of ${width} hashes is ${width * 32} bytes`);
      cache.set(key, data);
    }
    return cache.get(key);
  };
  const elements = async (level, start, count) => {
    const out = [];
    for (let i = start; i < start + count; i++) {
      const data = await tile(level, Math.floor(i / 256));
      const at = (i % 256) * 32;
      out.push(data.subarray(at, at + 32).toString("latin1"));
    }
    return out;
  };
  const subtree = async (start, end) => {
    const size = end - start;
    const height = Math.log2(size);
    if (Number.isInteger(height) && start % size === 0) {
      const level = Math.floor(height / 8);
      return runRoot(await elements(level, Math.floor(start / 2 ** (8 * level)), 2 ** (height % 8)));
    }
    const split = 2 ** Math.floor(Math.log2(size - 1));
    return nodeHash(await subtree(start, start + split), await subtree(start + split, end));
  };
  const roots = [];
  const append = (leaf) => {
    let height = 0;
    let value = leaf;
    while (roots.length && roots[roots.length - 1].height === height) {
      value = nodeHash(roots.pop().value, value);
      height += 1;
    }
    roots.push({ height, value });
  };
  const prefix = Math.floor((index + 1) / 256) * 256;
  let start = 0;
  for (let height = Math.floor(Math.log2(Math.max(prefix, 1))); height >= 0 && prefix > 0; height--) {
    if (Math.floor(prefix / 2 ** height) % 2 === 1) {
      roots.push({ height, value: await subtree(start, start + 2 ** height) });
      start += 2 ** height;
    }
  }
  let size = prefix;
  const found = [];
  for (let n = prefix / 256; n < Math.ceil(tree.size / 256); n++) {
    const data = await tile(-1, n);
    for (let at = 0; at < data.length; ) {
      if (at + 2 > data.length) throw new ScanError(`entry bundle ${n}: an entry bundle ends inside a length`);
      const length = data.readUInt16BE(at);
      if (at + 2 + length > data.length) throw new ScanError(`entry bundle ${n}: an entry bundle ends inside an entry`);
      const entry = data.subarray(at + 2, at + 2 + length);
      found.push([size, entry]);
      append(leafHash(entry.toString("latin1")));
      size += 1;
      at += 2 + length;
    }
  }
  let computed = roots.length ? roots[roots.length - 1].value : oneShot("", "latin1");
  for (let i = roots.length - 2; i >= 0; i--) computed = nodeHash(roots[i].value, computed);
  if (size !== tree.size || computed !== tree.root) throw new ScanError("the served entries do not lead to the bundle's checkpoint root");
  return found.filter(([i]) => i > index);
}

/** The report's status when exported, from the signed supersession statements naming it. */
function settleSupersessions(facts) {
  const lineNo = facts.reportLine;
  const statements = facts.supersessions === null ? [] : facts.supersessions;
  if (!Array.isArray(statements)) {
    failAt(facts, lineNo, "supersession", "the report line's supersessions is a list");
    return;
  }
  const body = isObject(facts.body) ? facts.body : {};
  const reportId = body.report_id;
  const digest = facts.bodyDigest;
  const given = [...facts.trustedKeys.keys()].sort();
  let superseded = null;
  for (const envelope of statements) {
    const problem = envelopeProblem(envelope);
    if (problem !== null) {
      failAt(facts, lineNo, "supersession", problem.replaceAll("attestation", "statement"));
      continue;
    }
    const payload = Buffer.from(envelope.payload, "base64");
    const statement = supersessionStatement(payload);
    if (statement === null) {
      failAt(facts, lineNo, "supersession", "not an in-toto supersession statement");
      continue;
    }
    const signer = supersessionSigner(facts, envelope, payload);
    if (signer === null) {
      failAt(facts, lineNo, "signature", "a supersession statement's signature does not verify");
      continue;
    }
    if (given.length && !signer.trusted) {
      failAt(facts, lineNo, "untrusted", `a supersession statement signed by ${signer.keyid}, not by ${namedKeys(given)} (given)`);
      continue;
    }
    const predicate = statement.predicate;
    if (predicate.superseded_report_id === reportId) {
      if (predicate.superseded_report_digest !== digest) {
        failAt(facts, lineNo, "supersession", "a statement supersedes another body");
        continue;
      }
      superseded = predicate;
    } else if (predicate.successor_report_id === reportId) {
      if (predicate.successor_report_digest !== digest) {
        failAt(facts, lineNo, "supersession", "a statement names another successor body");
        continue;
      }
    } else {
      failAt(facts, lineNo, "supersession", "a statement that does not name this report");
      continue;
    }
    facts.signedStatements.push({ envelope, predicate });
    count(facts, facts.proven, "supersession");
  }
  const envelopeStatus = isObject(facts.envelope) ? facts.envelope.status : undefined;
  if (superseded !== null) {
    const successor = superseded.successor_report_id || "none (a suite version activated)";
    const at = superseded.at === null || superseded.at === undefined ? "None" : String(superseded.at);
    facts.status = `superseded by ${successor} at ${at} (signed)`;
    if (envelopeStatus !== "superseded") {
      failAt(facts, lineNo, "supersession", "the envelope says current; a signed statement says superseded");
    }
  } else if (envelopeStatus === "superseded") {
    facts.status = "superseded when exported (no signed statement)";
    count(facts, facts.notProven, NO_SIGNED_SUPERSESSION);
  } else {
    facts.status = "current when exported";
  }
}

// ---- the in-toto test-result attestation (app/bundles/test_result_check.py) -----------------

const TEST_RESULT_PREDICATE = "https://in-toto.io/attestation/test-result/v0.1";
const NO_TEST_RESULT = "test result: the signed report carries no test-result attestation";
const REPORT_RESULTS = { pass: "PASSED", fail: "FAILED", error: "FAILED", inconclusive: "WARNED" };
const TEST_LISTS = { pass: "passedTests", fail: "failedTests", error: "failedTests" };

/** The service's base URL from a report page's URL (app/formats/test_result.py, base_of). */
function baseOf(url, reportId) {
  const suffix = `/reports/${reportId}`;
  if (!isString(url) || !url.endsWith(suffix) || url.length === suffix.length) return null;
  return url.slice(0, url.length - suffix.length);
}

function sha256Hex(digest) {
  if (!isString(digest)) throw new TypeError("not a digest");
  return { sha256: digest.startsWith("sha256:") ? digest.slice(7) : digest };
}

const byNameVersion = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);

/** The test-result statement's canonical bytes (test_result_statement), or null. */
function testResultStatement(body, base, digest) {
  try {
    const suite = body.suite_ref;
    const configuration = [{ name: `suite ${suite.name} version ${suite.version}`, uri: `${base}/api/v1/suites/${suite.name}/versions/${suite.version}`, digest: sha256Hex(suite.digest) }];
    const scorers = new Map();
    for (const check of body.checks) scorers.set(JSON.stringify([check.scorer_ref.name, check.scorer_ref.version]), check);
    const named = [...scorers.values()].map((c) => [c.scorer_ref.name, c.scorer_ref.version, c]).sort(byNameVersion);
    for (const [name, version, check] of named) {
      configuration.push({ name: `scorer ${name} version ${version}`, uri: `${base}/api/v1/scorers/${name}/versions/${version}`, digest: sha256Hex(check.scorer_ref.digest) });
    }
    const datasets = body.dataset_refs.map((d) => [d.name, d.version, d]).sort(byNameVersion);
    for (const [name, version, dataset] of datasets) {
      configuration.push({ name: `dataset ${name} version ${version}`, uri: `${base}/api/v1/datasets/${name}/versions/${version}`, digest: sha256Hex(dataset.digest) });
    }
    const page = `${base}/reports/${body.report_id}`;
    configuration.push({ name: `report ${body.report_id}`, uri: page, digest: sha256Hex(digest), mediaType: "application/json" });
    const tests = { passedTests: [], warnedTests: [], failedTests: [] };
    for (const check of body.checks) {
      tests[Object.hasOwn(TEST_LISTS, check.result) ? TEST_LISTS[check.result] : "warnedTests"].push(check.check_id);
      for (const item of check.slices) {
        tests[Object.hasOwn(TEST_LISTS, item.result) ? TEST_LISTS[item.result] : "warnedTests"].push(`${check.check_id}/${item.name}`);
      }
    }
    if (!Object.hasOwn(REPORT_RESULTS, body.result)) return null;
    const predicate = { result: REPORT_RESULTS[body.result], configuration, url: page, ...tests };
    return Buffer.from(canonicalize({ _type: STATEMENT_TYPE, subject: statementSubject(body.subject), predicateType: TEST_RESULT_PREDICATE, predicate }), "utf8");
  } catch {
    return null;
  }
}

function settleTestResult(facts) {
  const lineNo = facts.reportLine;
  const envelope = facts.testResult;
  if (envelope === null) {
    if (facts.attestation !== null) count(facts, facts.notProven, NO_TEST_RESULT);
    return;
  }
  const problem = envelopeProblem(envelope);
  if (problem !== null) {
    failAt(facts, lineNo, "test_result", problem.replaceAll("attestation", "test result"));
    return;
  }
  const payload = Buffer.from(envelope.payload, "base64");
  // The statement names the report's page, which the report line's envelope gives.
  const base = baseOf(isObject(facts.envelope) ? facts.envelope.url : null, String(facts.body.report_id));
  if (base === null) {
    failAt(facts, lineNo, "test_result", "the report's envelope names no page of this report");
    return;
  }
  const expected = testResultStatement(facts.body, base, facts.bodyDigest);
  if (expected === null || !payload.equals(expected)) {
    failAt(facts, lineNo, "test_result", "the test-result statement does not say what the report says");
    return;
  }
  const signed = supersessionSigner(facts, envelope, payload);
  if (signed === null) {
    failAt(facts, lineNo, "test_result", "the test-result statement's signature does not verify");
    return;
  }
  if (facts.signer !== null && facts.signer !== undefined && signed.keyid !== facts.signer.keyid) {
    failAt(facts, lineNo, "test_result", `signed by ${signed.keyid}, not by the report's signer ${facts.signer.keyid}`);
    return;
  }
  count(facts, facts.proven, "test_result");
}

/** (keyid, trusted) of the first signature that verifies, trusted keys first. */
function supersessionSigner(facts, envelope, payload) {
  const message = pae(PAYLOAD_TYPE, payload);
  for (const [keys, trusted] of [[facts.trustedKeys, true], [facts.bundleKeys, false]]) {
    for (const signature of envelope.signatures) {
      const raw = keys.get(signature.keyid);
      if (raw !== undefined && ed25519Verifies(raw, Buffer.from(signature.sig, "base64"), message)) {
        return { keyid: signature.keyid, trusted };
      }
    }
  }
  return null;
}

function supersessionStatement(payload) {
  let statement;
  try {
    statement = JSON.parse(payload.toString("utf8"));
  } catch {
    return null;
  }
  if (!isObject(statement) || statement._type !== STATEMENT_TYPE
      || statement.predicateType !== SUPERSESSION_PREDICATE || !isObject(statement.predicate)) {
    return null;
  }
  return statement;
}

function namedKeys(keyids) {
  return keyids.length === 1 ? keyids[0] : `one of ${keyids.join(", ")}`;
}

function envelopeProblem(envelope) {
  if (!isObject(envelope) || !sameKeys(envelope, ["payload", "payloadType", "signatures"])) {
    return "the attestation is a DSSE envelope: payload, payloadType, signatures";
  }
  if (envelope.payloadType !== PAYLOAD_TYPE) return `the attestation's payloadType is ${PAYLOAD_TYPE}`;
  if (strictBase64(envelope.payload) === null) return "the attestation's payload is base64";
  if (!Array.isArray(envelope.signatures) || envelope.signatures.length === 0) return "the attestation has signatures";
  for (const signature of envelope.signatures) {
    if (!isObject(signature) || !sameKeys(signature, ["keyid", "sig"]) || !isString(signature.keyid) || strictBase64(signature.sig) === null) {
      return 'each signature is {"keyid", "sig"} with a base64 sig';
    }
  }
  return null;
}

// The statement the service signs for a report (app/digest/signing.py, report_statement).
/** A statement's subject (app/digest/signing.py, statement_subject): its name and its digest. */
function statementSubject(subject) {
  const text = typeof subject.digest === "string" ? subject.digest : pyRepr(subject.digest);
  const at = text.indexOf(":");
  const [algorithm, value] = at === -1 ? [text, ""] : [text.slice(0, at), text.slice(at + 1)];
  const name = typeof subject.name === "string" ? subject.name : "subject";
  return [{ name, digest: { [algorithm]: value } }];
}

function reportStatement(body, digest) {
  if (!Object.hasOwn(body.subject, "digest")) return null;
  try {
    return Buffer.from('{"_type":' + JSON.stringify(STATEMENT_TYPE) + ',"predicate":{"body":' + canonicalize(body) +
      ',"report_digest":' + JSON.stringify(digest) + ',"report_id":' + JSON.stringify(body.report_id) +
      '},"predicateType":' + JSON.stringify(REPORT_PREDICATE) + ',"subject":' +
      canonicalize(statementSubject(body.subject)) + "}", "utf8");
  } catch {
    return null;
  }
}

function pae(type, payload) {
  const kind = Buffer.from(type, "utf8");
  return Buffer.concat([Buffer.from(`DSSEv1 ${kind.length} `), kind, Buffer.from(` ${payload.length} `), payload]);
}

function publicKeyObject(raw) {
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" });
}

function ed25519Verifies(raw, signature, message) {
  try {
    return verifySignature(null, message, publicKeyObject(raw), signature);
  } catch {
    return false;
  }
}

function pyQuote(text) {
  return `'${text}'`;
}

// ---- keys given on the command line --------------------------------------------------------

function parseKey(text) {
  let candidate = text;
  if (!text.includes("\n") && text.length < 4096 && existsSync(text) && statSync(text).isFile()) candidate = readFileSync(text, "utf8");
  if (candidate.includes("BEGIN PUBLIC KEY")) {
    let object;
    try {
      object = createPublicKey(candidate);
    } catch (error) {
      throw new BadArgument(`not a PEM public key: ${error.message}`);
    }
    if (object.asymmetricKeyType !== "ed25519") throw new BadArgument("not an Ed25519 public key");
    return Buffer.from(object.export({ format: "jwk" }).x, "base64url");
  }
  const raw = strictBase64(candidate.trim());
  if (raw === null || raw.length !== 32) throw new BadArgument("neither a PEM public key nor base64 of 32 Ed25519 bytes");
  return raw;
}

function parseKeysDocument(path) {
  let document;
  try {
    document = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new BadArgument(`${path}: not a keys document (${error.message})`);
  }
  const entries = isObject(document) ? document.keys : undefined;
  if (!Array.isArray(entries)) throw new BadArgument(`${path}: not a keys document (no "keys" list)`);
  const keys = new Map();
  for (const entry of entries) {
    const problem = keyProblem(entry);
    if (problem !== null) throw new BadArgument(`${path}: ${problem}`);
    keys.set(entry.keyid, Buffer.from(entry.public_key, "base64"));
  }
  return keys;
}

// ---- board bundles (docs/boards.md, "Proof") ---------------------------------------------
// The same checks under the same failure codes as app/bundles/board_verify.py and
// board_ranks.py; the p-values come from this file's own arithmetic (the regularized
// incomplete beta function), so they are compared within P_ABSOLUTE + P_RELATIVE.

const BOARD_FORMAT = "evalbook.board_bundle.v1";
const BOARD_PREDICATE = "https://evalbook.dev/board/v1";
const CASE_PREFIX = Buffer.from('{"kind":"case","record":');
const P_ABSOLUTE = 1e-9;
const P_RELATIVE = 1e-7;
const PASS_FAIL_METHODS = ["all_pass", "pass_rate"];
const UNSIGNED_REPORT = "signer: a ranked report carries no attestation";
const BOARD_NO_LOG = "log: the board carries no transparency log entry";
const BOARD_NOT_COVERED = "log: no checkpoint covered the board's entry when exported";

const r12 = (x) => Number(x.toPrecision(12));
const isNumber = (x) => typeof x === "number" && Number.isFinite(x);
const close = (a, b) => isNumber(a) && isNumber(b) && Math.abs(a - b) <= P_ABSOLUTE + P_RELATIVE * Math.max(Math.abs(a), Math.abs(b));

// ln Γ(x), x > 0 (Lanczos, g = 7, n = 9: about 15 significant digits).
const LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
  -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
function logGamma(x) {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let sum = LANCZOS[0];
  for (let i = 1; i < 9; i++) sum += LANCZOS[i] / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum);
}

// The continued fraction of the incomplete beta function (modified Lentz).
function betaFraction(a, b, x) {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 100000; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-16) break;
  }
  return h;
}

/** The regularized incomplete beta function I_x(a, b). */
export function incompleteBeta(x, a, b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return (front * betaFraction(a, b, x)) / a;
  return 1 - (front * betaFraction(b, a, 1 - x)) / b;
}

/** McNemar's exact two-sided p: min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2). */
export function mcnemarExact(b, c) {
  const n = b + c;
  const k = Math.min(b, c);
  if (k >= n) return 1;
  return Math.min(1, 2 * incompleteBeta(0.5, n - k, k + 1));
}

/** The paired t-test's two-sided p of differences d (sum, sum of squared deviations, n). */
export function pairedT(mean, squares, n) {
  if (n < 2) return 1;
  const variance = Math.max(squares / (n - 1), 0);
  if (variance <= 1e-24 * Math.max(1, mean * mean)) return Math.abs(mean) <= 1e-12 ? 1 : 0;
  const t = mean / Math.sqrt(variance / n);
  const df = n - 1;
  return incompleteBeta(df / (df + t * t), df / 2, 0.5);
}

/** Holm's step-down adjusted p-values, each rounded to 12 significant digits. */
export function holm(pValues) {
  const m = pValues.length;
  const order = pValues.map((p, i) => i).sort((i, j) => pValues[i] - pValues[j] || i - j);
  const adjusted = new Array(m);
  let running = 0;
  order.forEach((index, rank) => {
    running = Math.max(running, Math.min(1, (m - rank) * pValues[index]));
    adjusted[index] = r12(running);
  });
  return adjusted;
}

/** One report's check read case by case: its executed examples and their values. */
class ExampleValues {
  constructor(method, repeats) {
    this.method = method;
    this.repeats = repeats;
    this.values = new Map();
    this.current = null;
    this.cells = new Map();
  }

  add(record) {
    if (record.example_id !== this.current) {
      this.close();
      this.current = record.example_id;
    }
    this.cells.set(record.repeat, [record.status, record.score]);
  }

  close() {
    const cells = this.cells;
    this.cells = new Map();
    if (this.current === null || cells.size !== this.repeats) return;
    for (let r = 0; r < this.repeats; r++) {
      const cell = cells.get(r);
      if (cell === undefined || (cell[0] !== "pass" && cell[0] !== "fail")) return;
    }
    let value;
    if (PASS_FAIL_METHODS.includes(this.method)) {
      let passed = 0;
      for (const [status] of cells.values()) if (status === "pass") passed += 1;
      value = passed / this.repeats;
    } else {
      const scores = [...cells.values()].map(([, score]) => score);
      if (scores.some((s) => !isNumber(s))) return;
      value = this.method === "mean" ? scores.reduce((a, s) => a + s, 0) / scores.length : Math.min(...scores);
    }
    this.values.set(this.current, value);
  }

  finish() {
    this.close();
    this.current = null;
  }
}

/** Every pair of the ranked subjects from their values: n, b, c or the mean difference, p. */
function boardPairs(ranked, test) {
  const union = [...new Set(ranked.flatMap((s) => [...s.values.values.keys()]))];
  const rows = ranked.map((s) => Float64Array.from(union, (id) => (s.values.values.has(id) ? s.values.values.get(id) : NaN)));
  const pairs = [];
  for (let i = 0; i < ranked.length; i++) {
    for (let j = i + 1; j < ranked.length; j++) {
      const x = rows[i];
      const y = rows[j];
      let n = 0;
      let b = 0;
      let c = 0;
      let sum = 0;
      for (let e = 0; e < union.length; e++) {
        if (Number.isNaN(x[e]) || Number.isNaN(y[e])) continue;
        n += 1;
        b += x[e] * (1 - y[e]);
        c += y[e] * (1 - x[e]);
        sum += y[e] - x[e];
      }
      const first = ranked[i].subject;
      const second = ranked[j].subject;
      if (test === "mcnemar_exact") {
        pairs.push({ first, second, n, b, c, mean: null, p: n < 2 ? 1 : mcnemarExact(b, c) });
        continue;
      }
      const mean = n ? sum / n : 0;
      let squares = 0;
      for (let e = 0; e < union.length; e++) {
        if (Number.isNaN(x[e]) || Number.isNaN(y[e])) continue;
        const deviation = y[e] - x[e] - mean;
        squares += deviation * deviation;
      }
      pairs.push({ first, second, n, b: null, c: null, mean: r12(mean), p: pairedT(mean, squares, n) });
    }
  }
  return pairs;
}

const byScoreThenSubject = (a, b) => (b.score ?? 0) - (a.score ?? 0) || (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0);

/** The ranks of a board body against its subjects' values (app/bundles/board_ranks.py). */
function* settleRanks(lineNo, body, subjects, test) {
  const ranked = subjects.filter((s) => s.values.values.size && s.score !== null && s.score !== undefined).sort(byScoreThenSubject);
  const excluded = subjects.filter((s) => !(s.values.values.size && s.score !== null && s.score !== undefined));
  const names = ranked.map((s) => s.subject);
  if (canonicalize(body.subjects.map((e) => e.subject)) !== canonicalize(names) || canonicalize(body.excluded.map((e) => e.subject)) !== canonicalize(excluded.map((s) => s.subject))) {
    yield fail(lineNo, "ranks", "the subjects ranked and excluded, in order", pyList(names), null);
    return;
  }
  const mine = boardPairs(ranked, test);
  const pairs = body.pairs;
  if (pairs.length !== mine.length) {
    yield fail(lineNo, "pairs", "the number of pairs", mine.length, pairs.length);
    return;
  }
  for (let k = 0; k < pairs.length; k++) {
    const pair = pairs[k];
    const computed = mine[k];
    const name = `pair ${computed.first} / ${computed.second}`;
    if (canonicalize(pair.subjects) !== canonicalize([computed.first, computed.second])) {
      yield fail(lineNo, "pairs", `${name}: the pair's subjects`, null, pyList(pair.subjects));
    } else if (pair.n !== computed.n || (pair.b ?? null) !== computed.b || (pair.c ?? null) !== computed.c) {
      yield fail(lineNo, "pairs", `${name}: n, b, c from the cases`, null, null);
    } else if (computed.mean !== null && !close(pair.mean_difference, computed.mean)) {
      yield fail(lineNo, "pairs", `${name}: the mean difference from the cases`, computed.mean, pair.mean_difference);
    } else if (!close(pair.p_value, computed.p)) {
      yield fail(lineNo, "pairs", `${name}: the p-value from the cases`, computed.p, pair.p_value);
    } else {
      yield { proven: "pairs" };
    }
  }
  const adjusted = holm(pairs.map((p) => p.p_value));
  const index = new Map(names.map((s, i) => [s, i]));
  const better = new Set();
  let agreed = true;
  for (let k = 0; k < pairs.length; k++) {
    const pair = pairs[k];
    const [first, second] = pair.subjects;
    if (!close(pair.p_adjusted, adjusted[k])) {
      yield fail(lineNo, "pairs", `${first} / ${second}: Holm's adjusted p`, adjusted[k], pair.p_adjusted);
      agreed = false;
      continue;
    }
    const ahead = Object.hasOwn(pair, "b") ? pair.c > pair.b : pair.mean_difference > 0;
    let winner = null;
    if (pair.p_adjusted < body.alpha) {
      const [top, bottom] = ahead ? [second, first] : [first, second];
      better.add(`${index.get(top)},${index.get(bottom)}`);
      winner = top;
    }
    if ((pair.better ?? null) !== winner) {
      yield fail(lineNo, "pairs", `${first} / ${second}: which is better`, winner, pair.better);
      agreed = false;
    }
  }
  if (!agreed) return;
  const placed = body.subjects;
  const k = placed.length;
  const scores = placed.map((e) => e.score ?? 0);
  const count = (test) => { let n = 0; for (let j = 0; j < k; j++) if (test(j)) n += 1; return n; };
  for (let i = 0; i < k; i++) {
    const entry = placed[i];
    const rank = 1 + scores.filter((s) => s > scores[i]).length;
    const interval = [1 + count((j) => better.has(`${j},${i}`)), k - count((j) => better.has(`${i},${j}`))];
    if (entry.rank !== rank || canonicalize(entry.rank_interval) !== canonicalize(interval)) {
      yield fail(lineNo, "ranks", `${entry.subject}: rank and rank interval`, null, null);
    } else {
      yield { proven: "ranks" };
    }
  }
  const top = placed.filter((e, i) => k && !better.has(`0,${i}`)).map((e) => e.subject);
  if (canonicalize(body.top_group) !== canonicalize(top)) yield fail(lineNo, "ranks", "the top group", pyList(top), pyList(body.top_group));
}

const pyList = (items) => "[" + items.map((s) => `'${s}'`).join(", ") + "]";
const fail = (line, code, what, expected = null, actual = null) => ({ line, code, what, expected: str(expected), actual: str(actual) });
const checkOf = (body, checkId) => (Array.isArray(body.checks) ? body.checks.find((c) => isObject(c) && c.check_id === checkId) : undefined) ?? null;
const compare = (line, code, what, expected, actual) => (canonicalize(expected ?? null) === canonicalize(actual ?? null) ? { proven: code } : fail(line, code, what, expected, actual));

/** (statement, keyid, trusted) of an envelope whose signature verifies, trusted keys first. */
function openStatement(envelope, keys, trusted) {
  if (!isObject(envelope) || envelope.payloadType !== PAYLOAD_TYPE || !Array.isArray(envelope.signatures)) return null;
  const payload = strictBase64(envelope.payload);
  if (payload === null) return null;
  const message = pae(PAYLOAD_TYPE, payload);
  for (const [pool, isTrusted] of [[trusted, true], [keys, false]]) {
    for (const signature of envelope.signatures) {
      if (!isObject(signature) || !pool.has(signature.keyid)) continue;
      const sig = strictBase64(signature.sig);
      if (sig === null || !ed25519Verifies(pool.get(signature.keyid), sig, message)) continue;
      let statement;
      try {
        statement = JSON.parse(payload.toString("utf8"));
      } catch {
        return null;
      }
      if (isObject(statement) && statement._type === STATEMENT_TYPE) return [statement, signature.keyid, isTrusted];
    }
  }
  return null;
}

class BoardVerifier {
  constructor(trusted, requireTrust, policy) {
    this.trusted = trusted;
    this.requireTrust = requireTrust || trusted.size > 0;
    this.policy = policy;
    this.header = null;
    this.board = null;
    this.boardLine = 0;
    this.suite = null;
    this.reports = [];
    this.trailer = null;
    this.hash = sha256();
    this.failures = [];
    this.proven = {};
    this.notProven = {};
    this.signer = null;
    this.log = null;
  }

  feed(lineNo, data) {
    if (this.trailer !== null) return this.failures.push(fail(lineNo, "trailer", "a line after the trailer"));
    let value;
    let text;
    try {
      text = utf8.decode(data);
      value = JSON.parse(text);
    } catch {
      return this.failures.push(fail(lineNo, "line", "not JSON"));
    }
    if (!isObject(value) || !isCanonical(value, text)) return this.failures.push(fail(lineNo, "line", "not a canonical JSON object"));
    if (value.kind === "trailer") {
      this.trailer = [lineNo, value];
      return;
    }
    this.hash.update(data).update(NEWLINE);
    const kind = value.kind;
    if (kind === "case" && this.reports.length) {
      if (!isObject(value.record)) return this.failures.push(fail(lineNo, "line", "a case line holds a record"));
      const last = this.reports[this.reports.length - 1];
      last.values.add(value.record);
      const record = data.subarray(0, CASE_PREFIX.length).equals(CASE_PREFIX) ? data.subarray(CASE_PREFIX.length, data.length - 1) : Buffer.from(canonicalize(value.record), "utf8");
      last.leaves.push(leafHash(record.toString("latin1")));
    } else if (kind === "report" && this.suite !== null) {
      const [method, repeats] = this.method();
      this.reports.push({ lineNo, value, values: new ExampleValues(method, repeats), leaves: [] });
    } else if (kind === "header" && lineNo === 1) {
      this.header = value;
    } else if (kind === "board" && this.header !== null && this.board === null) {
      this.board = value;
      this.boardLine = lineNo;
    } else if (kind === "suite_version" && this.board !== null && this.suite === null) {
      this.suite = value;
    } else {
      this.failures.push(fail(lineNo, "line", `a ${str(kind) === null ? "None" : `'${kind}'`} line out of order`));
    }
  }

  method() {
    const content = isObject(this.suite.content) ? this.suite.content : {};
    const check = checkOf(content, isObject(this.board.body) ? this.board.body.check_id : undefined);
    return check === null ? ["pass_rate", 1] : [check.aggregation.method, Number(check.repeats)];
  }

  record(findings) {
    for (const found of findings) {
      if (found.proven !== undefined) this.proven[found.proven] = (this.proven[found.proven] ?? 0) + 1;
      else if (found.notProven !== undefined) this.notProven[found.notProven] = (this.notProven[found.notProven] ?? 0) + 1;
      else this.failures.push(found);
    }
  }

  bundleKeys() {
    const keys = new Map();
    for (const entry of Array.isArray(this.header.keys) ? this.header.keys : []) {
      const raw = isObject(entry) ? strictBase64(entry.public_key) : null;
      if (raw !== null && isString(entry.keyid)) keys.set(entry.keyid, raw);
    }
    return keys;
  }

  finish(lines) {
    this.lines = lines;
    if (this.header === null || this.header.format !== BOARD_FORMAT) throw new NotABundle("no board bundle header");
    this.record(this.settleTrailer(lines));
    if (this.board === null || this.suite === null) {
      this.failures.push(fail(lines, "line", "the bundle has no board or no suite_version line"));
      return;
    }
    const body = this.board.body;
    if (!isObject(body)) {
      this.failures.push(fail(this.boardLine, "board", "the board line has a body"));
      return;
    }
    this.boardId = body.board_id ?? null;
    this.boardDigest = this.board.digest ?? null;
    this.record(this.settleBoard(body));
    this.record(this.settleLog(body));
    this.record(this.settleSuite(body));
    const subjects = [];
    for (const found of this.settleReports(body)) {
      if (found.subject !== undefined) subjects.push(found);
      else this.record([found]);
    }
    const expected = body.subjects.length + body.excluded.length;
    if (subjects.length === expected && this.reports.length === expected) this.record(settleRanks(this.boardLine, body, subjects, body.methods.pairwise));
  }

  *settleTrailer(lines) {
    if (this.trailer === null) return yield fail(lines, "trailer", "the bundle has no trailer line");
    const [lineNo, trailer] = this.trailer;
    yield compare(lineNo, "trailer", "the lines before the trailer", trailer.lines, lineNo - 1);
    yield compare(lineNo, "trailer", "sha256 of the lines", trailer.sha256, PREFIX + this.hash.digest("hex"));
  }

  *settleBoard(body) {
    const lineNo = this.boardLine;
    const digest = digestOf(body);
    yield compare(lineNo, "board_digest", "the board body's digest vs the line", this.board.digest, digest);
    yield compare(lineNo, "board_digest", "the board body's digest vs the header", this.header.board_digest, digest);
    yield compare(lineNo, "board", "the board's id vs the header", this.header.board_id, body.board_id);
    const expected = { board: body, board_digest: this.board.digest, board_id: body.board_id };
    if (this.board.attestation === undefined) return yield fail(lineNo, "attestation", "the board carries no signed statement");
    const signer = yield* this.settleStatement(lineNo, this.board.attestation, BOARD_PREDICATE, expected);
    if (signer !== null) this.signer = { keyid: signer[0], trusted: signer[1] };
  }

  *settleLog(body) {
    const lineNo = this.boardLine;
    const policy = this.policy;
    const log = this.board.log;
    const demanded = policy.logKey !== null || policy.minWitnesses > 0;
    if (log === undefined || log === null || log.checkpoint === null || log.checkpoint === undefined) {
      if (demanded) return yield fail(lineNo, "log", "the board's entry is not proven in a checkpoint");
      return yield { notProven: log === undefined || log === null ? BOARD_NO_LOG : BOARD_NOT_COVERED };
    }
    const suite = isObject(body.suite_ref) ? body.suite_ref : {};
    const expected = {
      attestation_digest: canonicalDigest(this.board.attestation), board_digest: this.board.digest, board_id: body.board_id,
      check_id: body.check_id, created_at: body.created_at, kind: "board",
      suite: { digest: suite.digest ?? null, id: suite.id ?? null, version: suite.version ?? null },
    };
    if (canonicalize(log.entry ?? null) !== canonicalize(expected)) return yield fail(lineNo, "log", "the log's entry does not name this board and statement");
    let text;
    let stated;
    let proof;
    try {
      const key = policy.logKey !== null ? policy.logKey : parseVkey(log.key);
      text = openNote(log.checkpoint, key);
      stated = parseCheckpoint(text);
      proof = log.inclusion_proof.map((p) => strictBase64(p));
      if (proof.some((p) => p === null || p.length !== 32)) throw new NoteError("a proof's hash is 32 bytes of base64");
    } catch (error) {
      if (!(error instanceof NoteError) && !(error instanceof TypeError)) throw error;
      return yield fail(lineNo, "log", `the checkpoint or its proof does not verify: ${error.message}`);
    }
    const leaf = leafHash(Buffer.from(canonicalize(log.entry), "utf8").toString("latin1"));
    if (!Number.isSafeInteger(log.index) || rootFromInclusion(log.index, stated.size, leaf, proof.map((p) => p.toString("latin1"))) !== stated.root) {
      return yield fail(lineNo, "log", "the inclusion proof does not lead to the checkpoint's root");
    }
    const { signatures } = splitNote(log.checkpoint);
    const witnesses = policy.witnessKeys.filter((w) => signatures.some((s) => cosignatureVerifies(text, s, w))).length;
    if (witnesses < policy.minWitnesses) return yield fail(lineNo, "witnesses", `${witnesses} valid cosignature(s) by the given witnesses; --min-witnesses ${policy.minWitnesses}`);
    this.log = { index: log.index, tree_size: stated.size, trusted: policy.logKey !== null, witnesses };
    yield { proven: "log" };
  }

  *settleSuite(body) {
    const digest = digestOf(this.suite.content ?? null);
    const lineNo = this.boardLine + 1;
    yield compare(lineNo, "suite_digest", "the suite content's digest vs the line", this.suite.digest, digest);
    yield compare(lineNo, "suite_digest", "the suite content's digest vs the board's suite_ref", isObject(body.suite_ref) ? body.suite_ref.digest : null, digest);
    const [method, repeats] = this.method();
    const test = PASS_FAIL_METHODS.includes(method) && repeats === 1 ? "mcnemar_exact" : "paired_t";
    yield compare(lineNo, "pairs", "the board's pairwise test for this check", test, isObject(body.methods) ? body.methods.pairwise : null);
  }

  *settleReports(body) {
    const entries = [...(body.subjects ?? []), ...(body.excluded ?? [])];
    const named = entries.map((e) => e.report_id);
    const carried = this.reports.map((r) => r.value.report_id);
    if (canonicalize(named) !== canonicalize(carried.map((x) => x ?? null))) {
      yield fail(this.boardLine, "report", "the bundle's reports vs the board's subjects, in order", pyList(named), pyList(carried));
    }
    const byId = new Map(entries.map((e) => [e.report_id, e]));
    for (const { lineNo, value, values, leaves } of this.reports) {
      const entry = byId.get(value.report_id);
      if (entry === undefined) continue;
      values.finish();
      const check = yield* this.settleReport(lineNo, value, entry, body);
      if (check === null) continue;
      const committed = isObject(check.cases) ? check.cases : {};
      yield compare(lineNo, "cases_root", "the report's cases count vs its case lines", committed.count, leaves.length);
      yield compare(lineNo, "cases_root", "the tree rebuilt from the case lines vs the report's root", committed.root, digestOfBinary(merkleRoot(leaves)));
      yield { subject: entry.subject, reportId: value.report_id, score: check.score ?? null, values };
    }
  }

  *settleReport(lineNo, value, entry, board) {
    const body = value.body;
    if (!isObject(body)) {
      yield fail(lineNo, "report", "the report line has a body");
      return null;
    }
    const digest = digestOf(body);
    yield compare(lineNo, "report_digest", "the report body's digest vs the line", value.digest, digest);
    yield compare(lineNo, "report_digest", "the report body's digest vs the board", entry.report_digest, digest);
    const check = checkOf(body, String(board.check_id));
    const subject = isObject(body.subject) ? body.subject.digest : undefined;
    const same = check !== null && subject === entry.subject && canonicalize(body.suite_ref ?? null) === canonicalize(board.suite_ref ?? null) &&
      body.report_id === value.report_id &&
      (!Object.hasOwn(entry, "score") || canonicalize([check.score ?? null, check.interval ?? null]) === canonicalize([entry.score, entry.interval]));
    if (!same) {
      yield fail(lineNo, "report", "the report's subject, suite, check score and interval vs the board");
      return null;
    }
    yield* this.settleStatement(lineNo, value.attestation, REPORT_PREDICATE, { body, report_digest: digest, report_id: value.report_id });
    return check;
  }

  /** A statement signed (by a key given, when one is required) over `expected`: [keyid, trusted]. */
  *settleStatement(lineNo, envelope, predicateType, expected) {
    if (envelope === undefined || envelope === null) {
      yield { notProven: UNSIGNED_REPORT };
      return null;
    }
    const opened = openStatement(envelope, this.bundleKeys(), this.trusted);
    if (opened === null || opened[0].predicateType !== predicateType || canonicalize(opened[0].predicate ?? null) !== canonicalize(expected)) {
      yield fail(lineNo, "attestation", "the signed statement does not verify or is not this one's");
      return null;
    }
    if (this.requireTrust && !opened[2]) {
      yield fail(lineNo, "untrusted", `signed by ${opened[1]}, not by a key given`);
      return null;
    }
    yield { proven: "attestation" };
    return [opened[1], opened[2]];
  }

  document() {
    return {
      ok: this.failures.length === 0,
      kind: "board",
      lines: this.lines,
      failures: this.failures,
      proven: sorted(this.proven),
      not_proven: sorted(this.notProven),
      board_id: this.boardId ?? null,
      board_digest: this.boardDigest ?? null,
      signer: this.signer,
      log: this.log,
    };
  }
}

/** Whether a bundle's first line is a board bundle's header (read from its first 64 KiB). */
function isBoardBundle(path) {
  const head = Buffer.alloc(1 << 16);
  const handle = openSync(path, "r");
  let read;
  try {
    read = readSync(handle, head, 0, head.length, 0);
  } finally {
    closeSync(handle);
  }
  try {
    const text = gunzipSync(head.subarray(0, read), { finishFlush: zlibConstants.Z_SYNC_FLUSH }).toString("utf8");
    const header = JSON.parse(text.slice(0, text.indexOf("\n")));
    return isObject(header) && header.format === BOARD_FORMAT;
  } catch {
    return false;
  }
}

/** A board bundle's verification document (GzipDamage as a single failure, as for reports). */
async function verifyBoard(path, trusted, requireTrust, policy) {
  const verifier = new BoardVerifier(trusted, requireTrust, policy);
  let lineNo = 0;
  try {
    for await (const lines of readBatches(path, null)) for (const data of lines) verifier.feed(++lineNo, data);
  } catch (error) {
    if (!(error instanceof GzipDamage)) throw error;
    const damaged = new BoardVerifier(trusted, requireTrust, policy);
    damaged.lines = 0;
    damaged.failures.push(fail(0, error.code, error.message));
    return damaged.document();
  }
  verifier.finish(lineNo);
  return verifier.document();
}

async function verify(path, onBytes, trustedKeys, requireTrust, readBlock = READ_BLOCK, logPolicy = null) {
  const verifier = new Facts(trustedKeys, requireTrust);
  if (logPolicy !== null) verifier.logPolicy = logPolicy;
  let lineNo = 0;
  try {
    for await (const lines of readBatches(path, onBytes, readBlock)) {
      for (const data of lines) {
        lineNo += 1;
        feed(verifier, lineNo, data);
      }
    }
  } catch (error) {
    if (!(error instanceof GzipDamage)) throw error;
    const damaged = new Facts(trustedKeys, requireTrust);
    failAt(damaged, 0, error.code, error.message);
    // Everything read before the damage counts for nothing, its lines included (as in Python).
    return { lines: 0, verifier: damaged, damaged: true };
  }
  if (verifier.notABundle !== null) throw new NotABundle(verifier.notABundle);
  if (lineNo === 0) throw new NotABundle("no lines");
  finish(verifier, lineNo);
  await settleStatusLog(verifier, verifier.logPolicy.scanUrl ?? null);
  return { lines: lineNo, verifier, damaged: false };
}

function sorted(object) {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function parseArguments(argv) {
  const options = { files: [], json: false, keys: [], keyFiles: [], requireTrust: false, logKey: null, witnessKeys: [], minWitnesses: 0, scanUrl: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--json") options.json = true;
    else if (arg === "--require-trust") options.requireTrust = true;
    else if (arg === "--key" || arg === "--keys") {
      if (i + 1 >= argv.length) throw new BadArgument(`${arg} needs a value`);
      (arg === "--key" ? options.keys : options.keyFiles).push(argv[++i]);
    } else if (arg === "--log-key" || arg === "--witness-key" || arg === "--min-witnesses") {
      if (i + 1 >= argv.length) throw new BadArgument(`${arg} needs a value`);
      const value = argv[++i];
      try {
        if (arg === "--log-key") options.logKey = parseVkey(value);
        else if (arg === "--witness-key") options.witnessKeys.push(parseVkey(value));
        else if (/^[0-9]+$/.test(value)) options.minWitnesses = Number(value);
        else throw new BadArgument("--min-witnesses needs a whole number");
      } catch (error) {
        if (error instanceof NoteError) throw new BadArgument(error.message);
        throw error;
      }
    } else if (arg === "--log") {
      if (i + 1 >= argv.length) throw new BadArgument(`${arg} needs a value`);
      options.scanUrl = argv[++i];
    } else if (arg.startsWith("--key=")) options.keys.push(arg.slice(6));
    else if (arg.startsWith("--keys=")) options.keyFiles.push(arg.slice(7));
    else if (arg.startsWith("--")) throw new BadArgument(`unknown option ${arg}`);
    else options.files.push(arg);
  }
  return options;
}

// The exit statuses, as the Python verifier's (app/domain/exits.py): 0 proven, 1 a check failed,
// 2 not a bundle, 64 a bad argument or key, 66 no such file.
const EXIT_USAGE = 64;
const EXIT_NOT_FOUND = 66;
const EXITS = "exits 0 when everything provable was proven, 1 when a check fails, 2 when the file is not a bundle, 64 for a bad key or option, 66 when the file does not exist\n";

async function main(argv) {
  let options;
  const trusted = new Map();
  try {
    options = parseArguments(argv);
    for (const [kid, raw] of trustedKeysOf(options.keys)) trusted.set(kid, raw);
    for (const path of options.keyFiles) for (const [kid, raw] of parseKeysDocument(path)) trusted.set(kid, raw);
  } catch (error) {
    if (!(error instanceof BadArgument)) throw error;
    process.stderr.write(`verify-bundle: bad argument: ${error.message}\n`);
    return EXIT_USAGE;
  }
  if (options.files.length !== 1) {
    process.stderr.write("usage: verify-bundle.mjs FILE [--json] [--key PEM_OR_BASE64]... [--keys FILE]... [--require-trust] [--log-key VKEY] [--witness-key VKEY]... [--min-witnesses N] [--log URL]\n");
    process.stderr.write(EXITS);
    return EXIT_USAGE;
  }
  const path = options.files[0];
  if (!existsSync(path) || !statSync(path).isFile()) {
    process.stderr.write(`verify-bundle: no such file: ${path}\n`);
    return EXIT_NOT_FOUND;
  }
  if (isBoardBundle(path)) {
    const policy = { logKey: options.logKey, witnessKeys: options.witnessKeys, minWitnesses: options.minWitnesses };
    const document = await verifyBoard(path, trusted, options.requireTrust, policy);
    printBoard(document, options.json);
    return document.ok ? 0 : 1;
  }
  let outcome;
  try {
    let seen = 0;
    const total = statSync(path).size;
    const showProgress = process.stderr.isTTY && !options.json;
    outcome = await verify(path, showProgress ? (n) => {
      seen += n;
      process.stderr.write(`\rverifying ${Math.floor((100 * seen) / Math.max(total, 1))}%`);
    } : null, trusted, options.requireTrust, READ_BLOCK, { logKey: options.logKey, witnessKeys: options.witnessKeys, minWitnesses: options.minWitnesses, scanUrl: options.scanUrl });
    if (showProgress) process.stderr.write("\n");
  } catch (error) {
    if (error instanceof NotABundle) {
      process.stderr.write(`verify-bundle: not a bundle: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const document = outcomeDocument(outcome);
  if (options.json) {
    process.stdout.write(JSON.stringify(document, null, 2) + "\n");
  } else {
    for (const f of document.failures) {
      let text = `FAIL line ${f.line}: ${f.code}: ${f.what}`;
      if (f.expected !== null || f.actual !== null) text += ` (expected ${f.expected}, actual ${f.actual})`;
      process.stdout.write(text + "\n");
    }
    const proven = Object.values(document.proven).reduce((a, b) => a + b, 0);
    const signer = document.signer === null ? "not proven"
      : `${document.signer.keyid} (${document.signer.trusted ? "trusted" : "NOT trusted: no --key or --keys names it"})`;
    process.stdout.write(`report ${document.report_id} ${document.report_digest}\n`);
    process.stdout.write(`signer: ${signer}\n`);
    process.stdout.write(`status: ${document.status}\n`);
    const log = document.log === null ? "not proven"
      : `entry ${document.log.index} of ${document.log.tree_size} (checkpoint ${document.log.trusted ? "trusted" : "NOT trusted: no --log-key names it"}; ${document.log.witnesses} witness cosignature(s))`;
    process.stdout.write(`log: ${log}\n`);
    process.stdout.write(`${document.lines} lines; ${proven} checks proven; ${document.unavailable} unavailable, ${document.redacted} redacted\n`);
    for (const [what, n] of Object.entries(document.not_proven)) process.stdout.write(`not proven: ${what}: ${n}\n`);
    process.stdout.write(document.ok ? "OK: everything provable was proven\n" : `FAILED: ${document.failures.length}\n`);
  }
  return document.ok ? 0 : 1;
}

function printBoard(document, json) {
  if (json) {
    process.stdout.write(JSON.stringify(document, null, 2) + "\n");
    return;
  }
  for (const f of document.failures) {
    let text = `FAIL line ${f.line}: ${f.code}: ${f.what}`;
    if (f.expected !== null || f.actual !== null) text += ` (expected ${f.expected}, actual ${f.actual})`;
    process.stdout.write(text + "\n");
  }
  const signer = document.signer === null ? "not proven"
    : `${document.signer.keyid} (${document.signer.trusted ? "trusted" : "NOT trusted: no --key or --keys names it"})`;
  process.stdout.write(`board ${document.board_id} ${document.board_digest}\nsigner: ${signer}\n`);
  process.stdout.write(`log: ${document.log === null ? "not proven" : `entry ${document.log.index} of ${document.log.tree_size}`}\n`);
  const proven = Object.values(document.proven).reduce((a, b) => a + b, 0);
  process.stdout.write(`${document.lines} lines; ${proven} checks proven\n`);
  for (const [what, n] of Object.entries(document.not_proven)) process.stdout.write(`not proven: ${what}: ${n}\n`);
  process.stdout.write(document.ok ? "OK: everything provable was proven\n" : `FAILED: ${document.failures.length}\n`);
}

/** What a verification found, as `--json` prints it. */
function outcomeDocument({ lines, verifier, damaged }) {
  const itemsOf = (prefix) => Object.entries(verifier.notProven).filter(([w]) => w.startsWith(prefix)).reduce((a, [, n]) => a + n, 0);
  return {
    ok: verifier.failures.length === 0,
    lines,
    failures: verifier.failures,
    proven: sorted(verifier.proven),
    not_proven: sorted(verifier.notProven),
    replay: "not available in this verifier",
    report_id: damaged ? null : verifier.header.report_id ?? null,
    report_digest: damaged ? null : verifier.bodyDigest || null,
    signer: verifier.signer,
    status: verifier.status,
    log: damaged ? null : verifier.logOutcome,
    unavailable: itemsOf("unavailable: "),
    redacted: itemsOf("redacted: "),
  };
}

/** Trusted keys from `--key` values (PEM file, PEM text or base64 of the raw 32 bytes). */
export function trustedKeysOf(texts) {
  const keys = new Map();
  for (const text of texts) {
    const raw = parseKey(text);
    keys.set(hexDigest(sha256().update(raw).digest()), raw);
  }
  return keys;
}

/** Verify a bundle file: {exit, document} (exit 2 with `error` for a file that is no bundle). */
// `readBlock` (bytes of the file read at once) is for tests that cut the stream everywhere.
export async function verifyFile(path, { trustedKeys = new Map(), requireTrust = false, readBlock = READ_BLOCK } = {}) {
  try {
    if (isBoardBundle(path)) {
      const document = await verifyBoard(path, trustedKeys, requireTrust, { logKey: null, witnessKeys: [], minWitnesses: 0 });
      return { exit: document.ok ? 0 : 1, document };
    }
    const document = outcomeDocument(await verify(path, null, trustedKeys, requireTrust, readBlock));
    return { exit: document.ok ? 0 : 1, document };
  } catch (error) {
    if (error instanceof NotABundle) return { exit: 2, error: error.message };
    throw error;
  }
}

// Node can hang for good on its way out when an optimising compile on a background thread waits
// for a garbage collection that the main thread, already draining its platform tasks, never
// runs (nodejs/node#54918; seen here on Node 20, once in about 60 runs): the answer is printed,
// the process never exits. Optimising on the main thread leaves no such job. The flag is V8's,
// so it can only be given on the command line: the shebang gives it, and `node
// verify-bundle.mjs` runs itself again with it (about 50 ms). An embedding program that imports
// verifyFile should start Node with it too.
const SAFE_EXIT_FLAG = "--no-concurrent-recompilation";

// The verifier again as a child with the flag: its exit status, or its signal, is this one's.
function runWithSafeExit() {
  const child = spawnSync(process.execPath, [SAFE_EXIT_FLAG, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: "inherit",
  });
  if (child.error) {
    process.stderr.write(`verify-bundle: could not start node again: ${child.error.message}\n`);
    process.exitCode = 2;
  } else if (child.signal) {
    process.kill(process.pid, child.signal);
  } else {
    process.exitCode = child.status;
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("verify-bundle.mjs")) {
  if (!process.execArgv.includes(SAFE_EXIT_FLAG)) {
    runWithSafeExit();
  } else {
    // exitCode, not process.exit(): a pipe takes stdout asynchronously, and exiting at once cut
    // a long --json document at 64 KiB.
    main(process.argv.slice(2)).then((code) => {
      process.exitCode = code;
    }, (error) => {
      process.stderr.write(`verify-bundle: ${error.stack || error}\n`);
      process.exitCode = 2;
    });
  }
}
