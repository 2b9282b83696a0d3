"""The in-toto test-result predicate (v0.1) of a report, and its statement: what release
policy engines (Conforma, `cosign verify-attestation --type`) read. Both verifiers rebuild it
from the report body to check that the signed statement says what the body says."""

from __future__ import annotations

from typing import Any

import rfc8785

from app.digest.signing import STATEMENT_TYPE, statement_subject

TEST_RESULT_PREDICATE = "https://in-toto.io/attestation/test-result/v0.1"
# A report's result as the predicate says it; a test's (a check's or slice's) likewise.
REPORT_RESULTS = {"pass": "PASSED", "fail": "FAILED", "error": "FAILED", "inconclusive": "WARNED"}
TEST_LISTS = {"pass": "passedTests", "fail": "failedTests", "error": "failedTests"}


def report_page(base: str, report_id: str) -> str:
    """The report's page, which the predicate's `url` names."""
    return f"{base}/reports/{report_id}"


def base_of(url: Any, report_id: str) -> str | None:
    """The service's base URL from a report page's URL, None when `url` is not one."""
    suffix = f"/reports/{report_id}"
    if not isinstance(url, str) or not url.endswith(suffix) or len(url) == len(suffix):
        return None
    return url[: -len(suffix)]


def _hex(digest: str) -> dict[str, str]:
    return {"sha256": digest.removeprefix("sha256:")}


def configuration(body: dict[str, Any], base: str, report_digest: str) -> list[dict[str, Any]]:
    """What the tests ran under: the suite version, each scorer and dataset version, and the
    report body itself, as in-toto ResourceDescriptors."""
    suite = body["suite_ref"]
    found = [
        {
            "name": f"suite {suite['name']} version {suite['version']}",
            "uri": f"{base}/api/v1/suites/{suite['name']}/versions/{suite['version']}",
            "digest": _hex(suite["digest"]),
        }
    ]
    scorers = {(c["scorer_ref"]["name"], c["scorer_ref"]["version"]): c for c in body["checks"]}
    for (name, version), check in sorted(scorers.items()):
        found.append(
            {
                "name": f"scorer {name} version {version}",
                "uri": f"{base}/api/v1/scorers/{name}/versions/{version}",
                "digest": _hex(check["scorer_ref"]["digest"]),
            }
        )
    for dataset in sorted(body["dataset_refs"], key=lambda d: (d["name"], d["version"])):
        found.append(
            {
                "name": f"dataset {dataset['name']} version {dataset['version']}",
                "uri": f"{base}/api/v1/datasets/{dataset['name']}/versions/{dataset['version']}",
                "digest": _hex(dataset["digest"]),
            }
        )
    found.append(
        {
            "name": f"report {body['report_id']}",
            "uri": report_page(base, body["report_id"]),
            "digest": _hex(report_digest),
            "mediaType": "application/json",
        }
    )
    return found


def test_result_predicate(body: dict[str, Any], base: str, report_digest: str) -> dict[str, Any]:
    """The predicate: the report's result, its checks and slices as tests placed by their
    results (`check_id` and `check_id/slice`), its configuration and its page."""
    tests: dict[str, list[str]] = {"passedTests": [], "warnedTests": [], "failedTests": []}
    for check in body["checks"]:
        tests[TEST_LISTS.get(check["result"], "warnedTests")].append(check["check_id"])
        for item in check["slices"]:
            name = f"{check['check_id']}/{item['name']}"
            tests[TEST_LISTS.get(item["result"], "warnedTests")].append(name)
    return {
        "result": REPORT_RESULTS[body["result"]],
        "configuration": configuration(body, base, report_digest),
        "url": report_page(base, body["report_id"]),
        **tests,
    }


def test_result_statement(body: dict[str, Any], base: str, report_digest: str) -> bytes:
    """The statement's canonical JSON about the report's subject."""
    return rfc8785.dumps(
        {
            "_type": STATEMENT_TYPE,
            "subject": statement_subject(body["subject"]),
            "predicateType": TEST_RESULT_PREDICATE,
            "predicate": test_result_predicate(body, base, report_digest),
        }
    )
