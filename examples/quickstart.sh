#!/usr/bin/env bash
# From nothing to a verified verdict: a scorer, a dataset and a suite; an evaluation of one
# subject with its cases; the report; the service re-verifying it; a reproducibility bundle,
# downloaded and verified offline by both verifiers.
#
#   EVALBOOK_URL    where the service listens (default http://127.0.0.1:8000)
#   EVALBOOK_TOKEN  a token with admin (default: the demo token `evalbook serve` wrote)
#
# Needs curl and python3 (the service's own Python will do); node (18 or newer) for the
# second verifier, which is skipped without it. A test runs this script against a served
# process (tests/test_quickstart.py), so it stays true.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
url="${EVALBOOK_URL:-http://127.0.0.1:8000}"
token="${EVALBOOK_TOKEN:-$(cat "${EVALBOOK_DATA_DIR:-.evalbook}/demo-token")}"
evalbook="${EVALBOOK_CLI:-evalbook}"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

call() {  # METHOD PATH [JSON BODY] -> the answer's body; fails on an error status
  local method="$1" path="$2"
  shift 2
  curl --silent --show-error --fail-with-body -X "$method" "$url$path" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"
}
field() {  # read a field of the JSON on stdin: field report_id, field envelope.status
  "$python" -c 'import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    value = value[int(key)] if isinstance(value, list) else value[key]
print(value)' "$1"
}

echo "1. A scorer, a dataset of four examples, and a suite with one check"
call PUT /api/v1/scorers/exact-match/versions/1 -d '{"definition": {"kind": "exact"}}' >/dev/null
call PUT /api/v1/datasets/arithmetic/versions/1 -d '{"examples": [
  {"id": "q1", "body": {"q": "2+2"}, "tags": ["lang:en"]},
  {"id": "q2", "body": {"q": "3+3"}, "tags": ["lang:en"]},
  {"id": "q3", "body": {"q": "zwei+zwei"}, "tags": ["lang:de"]},
  {"id": "q4", "body": {"q": "drei+drei"}, "tags": ["lang:de"]}]}' >/dev/null
call PUT /api/v1/suites/arithmetic/versions/1 -d '{
  "validity_hours": 24,
  "checks": [{"check_id": "accuracy",
              "scorer": {"name": "exact-match", "version": "1"},
              "dataset": {"name": "arithmetic", "version": "1"},
              "aggregation": {"method": "pass_rate", "threshold": 0.5}}]}' >/dev/null

echo "2. An evaluation of one subject (a commit), its cases, then finish"
evaluation="$(call POST /api/v1/evaluations -d '{
  "subject": {"digest": "sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912", "repo": "acme/calc"},
  "suite": {"name": "arithmetic"}, "mode": "gate", "execution_mode": "external"}' \
  | field evaluation_id)"
curl --silent --show-error --fail-with-body -X POST "$url/api/v1/evaluations/$evaluation/cases" \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/x-ndjson' --data-binary @- \
  >/dev/null <<'NDJSON'
{"check_id": "accuracy", "example_id": "q1", "repeat": 0, "status": "pass", "output": {"answer": "4"}}
{"check_id": "accuracy", "example_id": "q2", "repeat": 0, "status": "pass", "output": {"answer": "6"}}
{"check_id": "accuracy", "example_id": "q3", "repeat": 0, "status": "pass", "output": {"answer": "vier"}}
{"check_id": "accuracy", "example_id": "q4", "repeat": 0, "status": "fail", "output": {"answer": "sieben"}}
NDJSON
call POST "/api/v1/evaluations/$evaluation/finish" >"$work/report.json"
report="$(field report_id <"$work/report.json")"
echo "   report $report: $(field body.result <"$work/report.json") ($(field body.checks.0.explanation <"$work/report.json"))"

echo "3. What a release gate asks: the current reports about the commit"
call GET "/evaluations/api/reports/forSubject?digest=sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912" \
  | "$python" -c 'import json, sys
for r in json.load(sys.stdin)["reports"]:
    print("   ", r["body"]["suite_ref"]["name"], r["body"]["result"], r["envelope"]["status"])'

echo "4. The service re-hashes the stored report"
echo "   verified: $(call POST /evaluations/api/reports/verify -d "{\"report_id\": \"$report\"}" | field verified)"

echo "5. A reproducibility bundle, downloaded and verified offline"
bundle="$(call POST /evaluations/api/reports/bundle -d "{\"report_id\": \"$report\"}" | field bundle_id)"
curl --silent --show-error --fail -o "$work/bundle.jsonl.gz" \
  -H "Authorization: Bearer $token" "$url/evaluations/api/reports/bundles/$bundle/content"
"$evalbook" verify-bundle --replay "$work/bundle.jsonl.gz"
if command -v node >/dev/null; then
  node "$root/verify-bundle.mjs" "$work/bundle.jsonl.gz"
else
  echo "   (node not found: the Node.js verifier is skipped)"
fi
echo "done"
