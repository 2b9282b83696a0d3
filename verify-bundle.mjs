#!/usr/bin/env node
// verify-bundle.mjs FILE [--json]: verify an EvalBook reproducibility bundle v1 offline.
// Node.js 18 or newer, no dependencies: node:zlib, node:crypto and its own RFC 8785
// canonicalizer. Exit 0 when everything provable was proven, 1 when anything failed,
// 2 for a file that is not a bundle. The checks and their codes mirror
// `evalbook verify-bundle` (app/bundles/verify.py); the test suite holds the two equal.

import { createHash } from "node:crypto";
import { createReadStream, existsSync, statSync } from "node:fs";
import { createGunzip } from "node:zlib";

const FORMAT = "evalbook.reproducibility_bundle.v1";
const PREFIX = "sha256:";
const PHASES = {
  header: 0, report: 1, suite_version: 2, scorer_version: 3, dataset_version: 4, example: 4,
  check: 5, case: 5, baseline_case: 5, unavailable: 6, redacted: 7, trailer: 8,
};
const CASE_FIELDS = ["check_id", "example_id", "repeat", "status", "score", "output_digest",
  "evidence_refs", "assurance", "scorer_digest"];
const REQUIRED = {
  header: ["format", "report_id", "report_digest", "created_at", "exporter", "producer",
    "baseline_evaluation_id"],
  report: ["digest", "body", "envelope"],
  suite_version: ["digest", "content"],
  scorer_version: ["name", "version", "digest", "definition", "score_range"],
  dataset_version: ["name", "version", "digest", "example_count"],
  example: ["dataset", "id", "tags", "body_digest"],
  check: ["check_id", "result"],
  case: CASE_FIELDS,
  baseline_case: CASE_FIELDS,
  unavailable: ["items"],
  redacted: ["items"],
  trailer: ["lines", "sha256"],
};
const UNAVAILABLE_REASONS = ["case_limit", "retention", "scorer_digest_mismatch",
  "scorer_missing", "stored_at_sso"];
const REDACTED_REASONS = ["permission", "trace_capture_policy"];

class NotABundle extends Error {}

// ---- RFC 8785 ---------------------------------------------------------------------------

/** The canonical JSON text of a parsed value (RFC 8785). */
export function canonicalize(value) {
  return write(value, null);
}

// `capture`, when given, receives the canonical text of each top-level member whose key it
// names, so a line's output or body is digested without serializing it twice.
function write(value, capture) {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new Error("non-finite number");
      // ECMAScript Number::toString is the form RFC 8785 prescribes (-0 prints as 0).
      return JSON.stringify(value);
    case "string":
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) {
        let out = "[";
        for (let i = 0; i < value.length; i++) out += (i ? "," : "") + write(value[i], null);
        return out + "]";
      }
      // The default sort compares UTF-16 code units, as RFC 8785 orders keys.
      const keys = Object.keys(value).sort();
      let out = "{";
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        const text = write(value[key], null);
        if (capture !== null && Object.hasOwn(capture, key)) capture[key] = text;
        out += (i ? "," : "") + JSON.stringify(key) + ":" + text;
      }
      return out + "}";
    }
    default:
      throw new Error(`not a JSON value: ${typeof value}`);
  }
}

const sha256 = () => createHash("sha256");
const digestOf = (value) => PREFIX + sha256().update(canonicalize(value), "utf8").digest("hex");
const digestOfText = (text) => PREFIX + sha256().update(text, "utf8").digest("hex");
const str = (value) => (value === undefined || value === null ? null : typeof value === "string" ? value : pyRepr(value));

// Expected/actual values are printed the way the Python verifier prints them.
function pyRepr(value) {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return "[" + value.map((v) => (typeof v === "string" ? `'${v}'` : pyRepr(v))).join(", ") + "]";
  return String(value);
}

// ---- reading ----------------------------------------------------------------------------

async function* readLines(path, onBytes) {
  const source = createReadStream(path, { highWaterMark: 1 << 20 });
  if (onBytes) source.on("data", (chunk) => onBytes(chunk.length));
  const gunzip = createGunzip({ chunkSize: 1 << 20 });
  source.pipe(gunzip);
  source.on("error", (error) => gunzip.destroy(error));
  let rest = Buffer.alloc(0);
  let started = false;
  try {
    for await (const chunk of gunzip) {
      started = true;
      let data = rest.length ? Buffer.concat([rest, chunk]) : chunk;
      let start = 0;
      let index;
      while ((index = data.indexOf(10, start)) !== -1) {
        yield data.subarray(start, index);
        start = index + 1;
      }
      rest = Buffer.from(data.subarray(start));
    }
  } catch (error) {
    if (!started) throw new NotABundle(`not a gzip stream: ${error.message}`);
    if (rest.length) yield rest;
    const eof = new Error(`the gzip stream is truncated (${error.message})`);
    eof.truncated = true;
    throw eof;
  }
  if (!started) throw new NotABundle("empty file");
  if (rest.length) yield rest;
}

// ---- the verifier -----------------------------------------------------------------------

class Dataset {
  constructor(lineNo, fields) {
    this.lineNo = lineNo;
    this.fields = fields;
    this.hash = sha256().update('{"examples":[');
    this.count = 0;
    this.lastId = null;
  }
  add(id, bodyDigest, tags) {
    if (this.count) this.hash.update(",");
    this.hash.update(canonicalize({ id, body_digest: bodyDigest, tags }), "utf8");
    this.count += 1;
  }
  digest() {
    const tail = canonicalize({ name: this.fields.name, version: this.fields.version });
    this.hash.update("]," + tail.slice(1), "utf8");
    return PREFIX + this.hash.digest("hex");
  }
}

class Evidence {
  constructor() {
    this.hash = sha256().update("[");
    this.entries = [];
    this.total = 0;
  }
  add(value) {
    const entries = [];
    if (value.output_digest) entries.push(value.output_digest);
    if (value.trace_ref) entries.push(value.trace_ref.digest);
    for (const ref of value.evidence_refs || []) entries.push(ref);
    for (const entry of entries) {
      if (this.total) this.hash.update(",");
      this.hash.update(JSON.stringify(entry), "utf8");
      this.total += 1;
      if (this.entries.length <= 20) this.entries.push(entry);
    }
  }
  digest() {
    this.hash.update("]");
    return PREFIX + this.hash.digest("hex");
  }
}

const decoder = new TextDecoder("utf-8", { fatal: true });
const NEWLINE = Buffer.from("\n");

class Verifier {
  constructor() {
    this.failures = [];
    this.proven = {};
    this.notProven = {};
    this.streamHash = sha256();
    this.pendingHash = [];
    this.pendingBytes = 0;
    this.captured = null;
    this.phase = -1;
    this.header = {};
    this.body = null;
    this.suite = null;
    this.trailerSeen = false;
    this.pinned = new Map();
    this.scorerLines = new Set();
    this.dataset = null;
    this.datasets = new Set();
    this.absentBodies = [];
    this.check = null;
    this.checkLines = new Set();
    this.evidence = new Map();
    this.lastCase = null;
    this.traced = new Set();
    this.items = [];
    this.mayHoldBodies = true;
  }

  // Lines are hashed in batches (one update per megabyte, not per line).
  hashLine(data) {
    this.pendingHash.push(data, NEWLINE);
    this.pendingBytes += data.length + 1;
    if (this.pendingBytes >= 1 << 20) this.flushHash();
  }

  flushHash() {
    if (this.pendingHash.length) this.streamHash.update(Buffer.concat(this.pendingHash, this.pendingBytes));
    this.pendingHash = [];
    this.pendingBytes = 0;
  }

  fail(lineNo, code, what, expected = null, actual = null) {
    this.failures.push({ line: lineNo, code, what, expected: str(expected), actual: str(actual) });
  }

  equal(lineNo, code, what, expected, actual) {
    const same = expected === actual ||
      (expected !== null && actual !== null && typeof expected === "object" &&
        typeof actual === "object" && canonicalize(expected) === canonicalize(actual));
    if (same) {
      this.proven[code] = (this.proven[code] || 0) + 1;
      return true;
    }
    this.fail(lineNo, code, what, expected, actual);
    return false;
  }

  feed(lineNo, data) {
    if (this.trailerSeen) {
      this.fail(lineNo, "after_trailer", "a line after the trailer");
      return;
    }
    let text;
    let value;
    try {
      text = decoder.decode(data);
      value = JSON.parse(text);
    } catch (error) {
      if (lineNo === 1) throw new NotABundle(`line 1 is not JSON: ${error.message}`);
      this.fail(lineNo, "not_json", `not JSON: ${error.message}`);
      this.hashLine(data);
      return;
    }
    const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
    const kind = isObject ? value.kind : undefined;
    if (lineNo === 1 && (kind !== "header" || value.format !== FORMAT)) {
      throw new NotABundle(`line 1 is not a ${FORMAT} header`);
    }
    if (kind !== "trailer") this.hashLine(data);
    if (!Object.hasOwn(PHASES, kind ?? "")) {
      this.fail(lineNo, "unknown_kind", `unknown line kind ${JSON.stringify(kind ?? null)}`);
      return;
    }
    this.captured = { output: undefined, body: undefined };
    if (write(value, kind === "case" || kind === "baseline_case" || kind === "example" ? this.captured : null) !== text) {
      this.fail(lineNo, "not_canonical", `the ${kind} line is not canonical JSON`);
    }
    const phase = PHASES[kind];
    if (phase < this.phase) this.fail(lineNo, "order", `a ${kind} line out of the bundle's order`);
    else if (phase > this.phase && (this.phase === 4 || this.phase === 5)) this.closeDataset();
    this.phase = Math.max(this.phase, phase);
    const missing = REQUIRED[kind].filter((name) => !Object.hasOwn(value, name));
    if (missing.length) {
      this.fail(lineNo, "malformed", `the ${kind} line lacks ${missing.join(", ")}`);
      if (kind === "trailer") this.trailerSeen = true;
      return;
    }
    try {
      this["on_" + kind](lineNo, value);
    } catch (error) {
      this.fail(lineNo, "malformed", `the ${kind} line lacks or mistypes a field (${error.message})`);
    }
  }

  on_header(lineNo, value) {
    this.header = value;
    const permissions = (value.exporter && value.exporter.permissions) || [];
    this.mayHoldBodies = permissions.includes("dataset.read_body") || permissions.includes("admin");
  }

  on_report(lineNo, value) {
    const body = (this.body = value.body);
    const computed = digestOf(body);
    this.equal(lineNo, "report_digest", "the body's digest vs the line", value.digest, computed);
    this.equal(lineNo, "report_digest", "the body's digest vs the header", this.header.report_digest ?? null, computed);
    this.equal(lineNo, "report_id", "the body's report_id vs the header", this.header.report_id ?? null, body.report_id ?? null);
    const envelope = value.envelope || {};
    this.equal(lineNo, "envelope", "envelope.expires_at vs the body's valid_until", body.valid_until ?? null, envelope.expires_at ?? null);
    const url = String(envelope.url ?? "");
    this.equal(lineNo, "envelope", "envelope.url names the report", `.../reports/${body.report_id}`, ".../reports/" + url.split("/reports/").pop());
    const status = envelope.status;
    if (status === "current") {
      const superseded = ["superseded_by", "superseded_at", "superseded_reason"].map((k) => envelope[k] ?? null);
      this.equal(lineNo, "envelope", "a current report's supersession fields", [null, null, null], superseded);
    } else if (status === "superseded") {
      this.equal(lineNo, "envelope", "superseded_reason is a known reason", true,
        ["re_evaluation", "suite_version_activated"].includes(envelope.superseded_reason));
    } else {
      this.fail(lineNo, "envelope", "envelope.status", "current or superseded", status ?? null);
    }
  }

  on_suite_version(lineNo, value) {
    const content = (this.suite = value.content);
    const computed = digestOf(content);
    this.equal(lineNo, "suite_digest", "the suite content's digest vs the line", value.digest, computed);
    this.equal(lineNo, "suite_digest", "the suite content's digest vs the body's suite_ref",
      (this.body && this.body.suite_ref && this.body.suite_ref.digest) ?? null, computed);
    for (const check of content.checks || []) {
      this.pinned.set(JSON.stringify([check.scorer.name, check.scorer.version]), check.scorer.digest);
    }
  }

  on_scorer_version(lineNo, value) {
    const key = JSON.stringify([value.name, value.version]);
    this.scorerLines.add(key);
    const computed = digestOf({ name: value.name, version: value.version, definition: value.definition });
    this.equal(lineNo, "scorer_digest", `scorer ${value.name} ${value.version} vs the line`, value.digest, computed);
    this.equal(lineNo, "scorer_digest", `scorer ${value.name} ${value.version} vs the suite's pin`, this.pinned.get(key) ?? null, computed);
  }

  on_dataset_version(lineNo, value) {
    this.closeDataset();
    this.dataset = new Dataset(lineNo, value);
    this.datasets.add(value.digest);
  }

  on_example(lineNo, value) {
    const dataset = this.dataset;
    if (dataset === null || value.dataset !== dataset.fields.digest) {
      this.fail(lineNo, "order", "an example outside its dataset version");
      return;
    }
    const key = Buffer.from(value.id, "utf8");
    if (dataset.lastId !== null && Buffer.compare(key, dataset.lastId) <= 0) {
      this.fail(lineNo, "order", `example ${pyQuote(value.id)} is not in id order`);
    }
    dataset.lastId = key;
    dataset.add(value.id, value.body_digest, value.tags);
    if (Object.hasOwn(value, "body")) {
      if (!this.mayHoldBodies) {
        this.fail(lineNo, "body_without_permission", "an example body for an exporter without dataset.read_body");
      }
      this.equal(lineNo, "body_digest", `example ${pyQuote(value.id)} body`, value.body_digest, digestOfText(this.captured.body));
    } else {
      this.absentBodies.push([lineNo, value.dataset, value.id]);
    }
  }

  closeDataset() {
    const dataset = this.dataset;
    this.dataset = null;
    if (dataset === null) return;
    const { fields, lineNo } = dataset;
    this.equal(lineNo, "dataset_count", `dataset ${fields.name} ${fields.version} example count`, fields.example_count, dataset.count);
    const computed = dataset.digest();
    this.equal(lineNo, "dataset_digest", `dataset ${fields.name} ${fields.version} from its example lines`, fields.digest, computed);
    const ref = ((this.body && this.body.dataset_refs) || []).find((r) => r.digest === computed);
    this.equal(lineNo, "dataset_digest", `dataset ${fields.name} ${fields.version} vs the body's dataset_refs`, true,
      ref !== undefined && ref.name === fields.name && ref.version === fields.version);
  }

  on_check(lineNo, value) {
    const checkId = value.check_id;
    this.check = value;
    this.lastCase = null;
    this.checkLines.add(checkId);
    const expected = ((this.body && this.body.checks) || []).find((c) => c.check_id === checkId);
    if (expected === undefined) {
      this.fail(lineNo, "check_result", `check ${pyQuote(checkId)} is not in the report body`);
      return;
    }
    this.equal(lineNo, "check_result", `check ${pyQuote(checkId)} vs the report body`, canonicalize(expected), canonicalize(value.result));
    if (expected.evidence_manifest) {
      if (value.manifest === undefined) {
        this.fail(lineNo, "manifest", `check ${pyQuote(checkId)} has evidence_manifest but no manifest`);
      } else {
        this.equal(lineNo, "manifest", `check ${pyQuote(checkId)} manifest vs its evidence_refs`, expected.evidence_refs[0], digestOf(value.manifest));
      }
    }
    this.evidence.set(checkId, [lineNo, new Evidence()]);
  }

  on_case(lineNo, value) {
    this.anyCase(lineNo, value, "case");
  }

  on_baseline_case(lineNo, value) {
    this.anyCase(lineNo, value, "baseline_case");
  }

  anyCase(lineNo, value, kind) {
    const checkId = value.check_id;
    if (this.check === null || checkId !== this.check.check_id) {
      this.fail(lineNo, "order", `a ${kind} of ${pyQuote(checkId)} outside its check`);
      return;
    }
    const position = [kind, Buffer.from(value.example_id, "utf8"), value.repeat];
    const last = this.lastCase;
    if (last !== null && last[0] === "baseline_case" && kind === "case") {
      this.fail(lineNo, "order", "a case after the baseline's cases");
    } else if (last !== null && last[0] === kind) {
      const order = Buffer.compare(position[1], last[1]) || Math.sign(position[2] - last[2]);
      if (order <= 0) {
        this.fail(lineNo, "order", `${kind} ${pyQuote(value.example_id)}/${value.repeat} is not in case order`);
      }
    }
    this.lastCase = position;
    if (kind === "case") this.evidence.get(checkId)[1].add(value);
    if (Object.hasOwn(value, "trace_ref")) this.traced.add(JSON.stringify([kind, checkId]));
    if (Object.hasOwn(value, "output")) {
      if (!this.mayHoldBodies) {
        this.fail(lineNo, "body_without_permission", "a case output for an exporter without dataset.read_body");
      }
      this.equal(lineNo, "output_digest", `${kind} ${checkId}/${value.example_id}/${value.repeat} output`,
        value.output_digest ?? null, digestOfText(this.captured.output));
    }
  }

  on_unavailable(lineNo, value) {
    this.onItems(lineNo, value, "unavailable", UNAVAILABLE_REASONS);
  }

  on_redacted(lineNo, value) {
    this.onItems(lineNo, value, "redacted", REDACTED_REASONS);
  }

  onItems(lineNo, value, kind, reasons) {
    for (const item of value.items) {
      const isObject = item !== null && typeof item === "object" && !Array.isArray(item);
      if (!isObject || !["what", "ref", "reason"].every((k) => Object.hasOwn(item, k))) {
        this.fail(lineNo, "item", `a ${kind} item without what, ref and reason`, null, canonicalize(item));
        continue;
      }
      if (!reasons.includes(item.reason)) {
        this.fail(lineNo, "item", `a ${kind} item's reason`, reasons, item.reason);
        continue;
      }
      this.items.push(item);
      const key = `${kind}: ${item.what} (${item.reason})`;
      this.notProven[key] = (this.notProven[key] || 0) + (item.count ?? 1);
    }
  }

  on_trailer(lineNo, value) {
    this.trailerSeen = true;
    this.flushHash();
    this.equal(lineNo, "trailer_lines", "lines before the trailer", value.lines, lineNo - 1);
    this.equal(lineNo, "trailer_sha256", "sha256 of the lines before the trailer", value.sha256, PREFIX + this.streamHash.digest("hex"));
  }

  finish(lastLine) {
    this.closeDataset();
    if (!this.trailerSeen) this.fail(lastLine, "no_trailer", `the stream ends at line ${lastLine} without a trailer`);
    if (!this.body || !this.suite) {
      this.fail(lastLine, "missing_line", "the report or suite_version line is missing");
      return;
    }
    for (const ref of this.body.dataset_refs || []) {
      if (!this.datasets.has(ref.digest)) this.fail(lastLine, "missing_line", `no dataset_version line for ${ref.name} ${ref.version}`);
    }
    for (const check of this.body.checks || []) {
      if (!this.checkLines.has(check.check_id)) this.fail(lastLine, "missing_line", `no check line for ${pyQuote(check.check_id)}`);
    }
    const byWhat = (what) => this.items.filter((i) => i.what === what);
    const missingScorers = new Set(byWhat("scorer_version").map((i) => JSON.stringify([i.ref.name ?? null, i.ref.version ?? null])));
    for (const key of [...this.pinned.keys()].sort()) {
      if (!this.scorerLines.has(key) && !missingScorers.has(key)) {
        const [name, version] = JSON.parse(key);
        this.fail(lastLine, "unexplained", `pinned scorer ${name} ${version} has no line and no unavailable item`);
      }
    }
    const removed = new Set(byWhat("example_body").map((i) => JSON.stringify([i.ref.dataset ?? null, i.ref.example_id ?? null])));
    const withheld = new Set(byWhat("example_bodies").map((i) => i.ref.dataset));
    for (const [lineNo, dataset, id] of this.absentBodies) {
      if (!removed.has(JSON.stringify([dataset, id])) && !withheld.has(dataset)) {
        this.fail(lineNo, "unexplained", `example ${pyQuote(id)} has no body and no redacted or unavailable item`);
      } else {
        this.proven.absent_body_explained = (this.proven.absent_body_explained || 0) + 1;
      }
    }
    const traces = new Set(byWhat("trace_bodies").map((i) => JSON.stringify([i.ref.kind ?? null, i.ref.check_id ?? null])));
    for (const key of [...this.traced].sort()) {
      if (!traces.has(key)) {
        const [kind, checkId] = JSON.parse(key);
        this.fail(lastLine, "unexplained", `${kind}s of ${pyQuote(checkId)} carry trace refs but no trace_bodies item`);
      }
    }
    const limited = new Set(byWhat("cases").map((i) => JSON.stringify([i.ref.kind ?? null, i.ref.check_id ?? null])));
    const bodyChecks = new Map((this.body.checks || []).map((c) => [c.check_id, c]));
    for (const [checkId, [lineNo, rebuilt]] of this.evidence) {
      if (limited.has(JSON.stringify(["case", checkId])) || !bodyChecks.has(checkId)) continue;
      const check = bodyChecks.get(checkId);
      const refs = check.evidence_refs || [];
      if (check.evidence_manifest) {
        this.equal(lineNo, "evidence", `check ${pyQuote(checkId)} evidence rebuilt from its cases vs the manifest`, refs.length ? refs[0] : null, rebuilt.digest());
      } else {
        this.equal(lineNo, "evidence", `check ${pyQuote(checkId)} evidence rebuilt from its cases`, refs, rebuilt.entries);
      }
    }
  }
}

function pyQuote(text) {
  return `'${text}'`;
}

async function verify(path, onBytes) {
  const verifier = new Verifier();
  let lineNo = 0;
  try {
    for await (const data of readLines(path, onBytes)) {
      lineNo += 1;
      verifier.feed(lineNo, data);
    }
  } catch (error) {
    if (error instanceof NotABundle || !error.truncated) throw error;
    verifier.fail(lineNo, "truncated", error.message);
  }
  if (lineNo === 0) throw new NotABundle("no lines");
  verifier.finish(lineNo);
  return { lines: lineNo, verifier };
}

function sorted(object) {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

async function main(argv) {
  const args = argv.filter((a) => !a.startsWith("--"));
  const asJson = argv.includes("--json");
  if (args.length !== 1) {
    process.stderr.write("usage: verify-bundle.mjs FILE [--json]\n");
    return 2;
  }
  const path = args[0];
  if (!existsSync(path) || !statSync(path).isFile()) {
    process.stderr.write(`verify-bundle: no such file: ${path}\n`);
    return 2;
  }
  let outcome;
  try {
    let seen = 0;
    const total = statSync(path).size;
    const showProgress = process.stderr.isTTY && !asJson;
    outcome = await verify(path, showProgress ? (n) => {
      seen += n;
      process.stderr.write(`\rverifying ${Math.floor((100 * seen) / Math.max(total, 1))}%`);
    } : null);
    if (showProgress) process.stderr.write("\n");
  } catch (error) {
    if (error instanceof NotABundle) {
      process.stderr.write(`verify-bundle: not a bundle: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const { lines, verifier } = outcome;
  const ok = verifier.failures.length === 0;
  if (asJson) {
    const document = {
      ok,
      lines,
      failures: verifier.failures,
      proven: sorted(verifier.proven),
      not_proven: sorted(verifier.notProven),
      replay: "not available in this verifier",
    };
    process.stdout.write(JSON.stringify(document, null, 2) + "\n");
  } else {
    for (const f of verifier.failures) {
      let text = `FAIL line ${f.line}: ${f.code}: ${f.what}`;
      if (f.expected !== null || f.actual !== null) text += ` (expected ${f.expected}, actual ${f.actual})`;
      process.stdout.write(text + "\n");
    }
    const proven = Object.values(verifier.proven).reduce((a, b) => a + b, 0);
    process.stdout.write(`${lines} lines; ${proven} checks proven\n`);
    for (const [what, count] of Object.entries(sorted(verifier.notProven))) {
      process.stdout.write(`not proven: ${what}: ${count}\n`);
    }
    process.stdout.write(ok ? "OK: everything provable was proven\n" : `FAILED: ${verifier.failures.length}\n`);
  }
  return ok ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("verify-bundle.mjs")) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (error) => {
    process.stderr.write(`verify-bundle: ${error.stack || error}\n`);
    process.exit(2);
  });
}
