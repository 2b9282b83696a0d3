"""Table-driven tests of every status rule and precedence case of semantics.md."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import rfc8785
from scipy import stats
from statsmodels.stats.multitest import multipletests

from app.aggregation.engine import aggregate
from app.digest.canonical import digest_of
from tests.aggregation_helpers import build_input, freeze

SCORERS = [
    {"name": "s", "version": "1", "definition": {"k": "s"}, "score_range": None},
    {"name": "s", "version": "2", "definition": {"k": "s2"}, "score_range": None},
    {"name": "r", "version": "1", "definition": {"k": "r"}, "score_range": [0, 1]},
]


def dataset(n: int = 10, de: tuple[int, ...] = (0, 1, 2)) -> dict[str, Any]:
    return {
        "name": "d",
        "version": "1",
        "examples": [
            {"id": f"e{i:02d}", "body": {"i": i}, "tags": ["de" if i in de else "en"]}
            for i in range(n)
        ],
    }


def check(
    check_id: str = "c",
    method: str = "pass_rate",
    threshold: float | None = 0.5,
    scorer: str = "s",
    **extra: Any,
) -> dict[str, Any]:
    aggregation: dict[str, Any] = {"method": method}
    if threshold is not None:
        aggregation["threshold"] = threshold
    return {
        "check_id": check_id,
        "scorer": {"name": scorer, "version": "1"},
        "dataset": {"name": "d", "version": "1"},
        "aggregation": aggregation,
        **extra,
    }


def c(
    i: int, status: str = "pass", repeat: int = 0, check_id: str = "c", **extra: Any
) -> dict[str, Any]:
    return {
        "check_id": check_id,
        "example_id": f"e{i:02d}",
        "repeat": repeat,
        "status": status,
        "output": {"o": i, "r": repeat},
        **extra,
    }


def run(
    checks: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    *,
    n: int = 10,
    rule: dict[str, Any] | None = None,
    baseline: list[dict[str, Any]] | None = None,
    edition: int = 2,
    look: int | None = None,
    spending: str | None = None,
) -> dict[str, Any]:
    data = dataset(n)
    suite: dict[str, Any] = {"validity_hours": 1, "checks": checks, "decision_rule": rule or {}}
    if spending is not None:
        suite["reevaluation_spending"] = spending
    content = freeze(suite, data, SCORERS)
    inp = build_input(content, data, SCORERS, cases, baseline=baseline, edition=edition, look=look)
    return aggregate(inp).body


def passing(n: int = 10, check_id: str = "c", **extra: Any) -> list[dict[str, Any]]:
    return [c(i, check_id=check_id, **extra) for i in range(n)]


CASES = [
    # (name, checks, cases, rule, expected status, expected step)
    ("missing", [check()], [], None, "missing", "missing"),
    (
        "all_pass failure with pending",
        [check(method="all_pass", threshold=None)],
        [c(0, "fail"), c(1)],
        None,
        "fail",
        "already_failed",
    ),
    (
        "all_pass failure in an unexecuted example",
        [check(method="all_pass", threshold=None, repeats=2)],
        [c(0, "fail", 0), c(0, "error", 1)]
        + [c(i, repeat=r) for i in range(1, 10) for r in (0, 1)],
        None,
        "fail",
        "already_failed",
    ),
    (
        "min below threshold",
        [check(method="min", threshold=0.5)],
        [c(0, score=0.2)] + [c(i, score=0.9) for i in range(1, 3)],
        None,
        "fail",
        "already_failed",
    ),
    (
        "pass_rate cannot reach",
        [check(threshold=0.7)],
        [c(i, "fail") for i in range(4)] + [c(4), c(5)],
        None,
        "fail",
        "already_failed",
    ),
    (
        "pass_rate could still reach",
        [check(threshold=0.6)],
        [c(i, "fail") for i in range(4)] + [c(4), c(5)],
        None,
        "inconclusive",
        "not_enough_evidence",
    ),
    (
        "pass_rate under interval is not already failed",
        [check(threshold=0.7)],
        [c(i, "fail") for i in range(4)] + [c(4), c(5)],
        {"rule": "interval"},
        "inconclusive",
        "not_enough_evidence",
    ),
    (
        "mean with range cannot reach",
        [check(method="mean", threshold=0.8, scorer="r")],
        [c(i, score=0.1) for i in range(5)],
        None,
        "fail",
        "already_failed",
    ),
    (
        "mean without range is not already failed",
        [check(method="mean", threshold=0.8)],
        [c(i, score=0.1) for i in range(5)],
        None,
        "inconclusive",
        "not_enough_evidence",
    ),
    (
        "required slice failed",
        [
            check(
                threshold=0.5,
                slices=[{"name": "de", "tag": "de", "required": True, "threshold": 0.9}],
            )
        ],
        [c(0, "fail")] + [c(i) for i in range(1, 10)],
        None,
        "fail",
        "required_slice_failed",
    ),
    (
        "optional slice failed",
        [check(threshold=0.5, slices=[{"name": "de", "tag": "de", "threshold": 0.9}])],
        [c(0, "fail")] + [c(i) for i in range(1, 10)],
        None,
        "pass",
        "decision",
    ),
    (
        "dominant reason error",
        [check()],
        [c(i) for i in range(5)]
        + [c(5, "error"), c(6, "error"), c(7, "error"), c(8, "timeout"), c(9, "timeout")],
        None,
        "error",
        "not_enough_evidence",
    ),
    (
        "tie goes to the earlier reason",
        [check()],
        [c(i) for i in range(6)]
        + [c(6, "cancelled"), c(7, "cancelled"), c(8, "timeout"), c(9, "timeout")],
        None,
        "timeout",
        "not_enough_evidence",
    ),
    (
        "skipped after abstained",
        [check()],
        [c(i) for i in range(8)] + [c(8, "skipped"), c(9, "abstained")],
        None,
        "abstained",
        "not_enough_evidence",
    ),
    (
        "stale beats timeout",
        [check()],
        [c(i) for i in range(8)] + [c(8, scorer_version="2"), c(9, "timeout")],
        None,
        "stale",
        "not_enough_evidence",
    ),
    (
        "pending gives inconclusive",
        [check()],
        [c(i) for i in range(9)],
        None,
        "inconclusive",
        "not_enough_evidence",
    ),
    (
        "all executed but fewer than min_samples",
        [check(min_samples=11)],
        [c(i) for i in range(10)],
        None,
        "inconclusive",
        "not_enough_evidence",
    ),
    (
        "min_coverage below 1 lets a check decide",
        [check(min_coverage=0.8)],
        [c(i) for i in range(9)],
        None,
        "pass",
        "decision",
    ),
    (
        "threshold pass",
        [check(threshold=0.5)],
        [c(i, "pass" if i < 5 else "fail") for i in range(10)],
        None,
        "pass",
        "decision",
    ),
    # With every example executed the best possible rate is the rate itself: step 2 decides.
    (
        "threshold fail",
        [check(threshold=0.6)],
        [c(i, "pass" if i < 5 else "fail") for i in range(10)],
        None,
        "fail",
        "already_failed",
    ),
    (
        "interval straddles",
        [check(threshold=0.5)],
        [c(i, "pass" if i < 6 else "fail") for i in range(10)],
        {"rule": "interval"},
        "inconclusive",
        "decision",
    ),
    (
        "interval above",
        [check(threshold=0.3)],
        [c(i, "pass" if i < 9 else "fail") for i in range(10)],
        {"rule": "interval"},
        "pass",
        "decision",
    ),
    (
        "interval below",
        [check(threshold=0.9)],
        [c(i, "pass" if i < 3 else "fail") for i in range(10)],
        {"rule": "interval"},
        "fail",
        "decision",
    ),
    (
        "required slice not passed",
        [
            check(
                threshold=0.5,
                min_samples=3,
                slices=[{"name": "two", "tag": "de", "required": True}],
            )
        ],
        [c(i) for i in range(10)],
        None,
        "pass",
        "decision",
    ),
    (
        "mean decision",
        [check(method="mean", threshold=0.5)],
        [c(i, score=0.4 + i / 100) for i in range(10)],
        None,
        "fail",
        "decision",
    ),
    (
        "min decision",
        [check(method="min", threshold=0.3)],
        [c(i, score=0.4 + i / 100) for i in range(10)],
        None,
        "pass",
        "decision",
    ),
]


@pytest.mark.parametrize(
    ("checks", "cases", "rule", "status", "step"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_status_rules(checks, cases, rule, status, step) -> None:
    body = run(checks, cases, rule=rule)
    result = body["checks"][0]
    assert result["status"] == status
    if status != "pass":
        reason = next(r for r in body["reasons"] if r["code"].startswith("check_"))
        assert reason["step"] == step and reason["status"] == status


def test_required_slice_not_passed_takes_the_slice_status() -> None:
    data_checks = [
        check(
            threshold=0.5, slices=[{"name": "de", "tag": "de", "required": True}], min_coverage=0.5
        )
    ]
    cases = [c(0, "timeout"), c(1, "timeout")] + [c(i) for i in range(2, 10)]
    body = run(data_checks, cases)
    result = body["checks"][0]
    assert result["slices"][0]["status"] == "timeout"
    assert result["status"] == "timeout"
    assert body["reasons"][0]["step"] == "required_slice_not_passed"
    assert "required slice de is timeout" in result["explanation"]


@pytest.mark.parametrize(
    ("statuses", "complete", "expected"),
    [
        ({"a": "fail", "b": "error"}, True, "fail"),
        ({"a": "error", "b": "pass"}, True, "error"),
        ({"a": "pass", "b": "pass"}, True, "pass"),
        ({"a": "pass", "b": "pass"}, False, "inconclusive"),
        ({"a": "pass", "b": "timeout"}, True, "inconclusive"),
    ],
)
def test_report_result_precedence(statuses: dict[str, str], complete: bool, expected: str) -> None:
    checks = [
        check("a", method="all_pass", threshold=None, min_coverage=0.6),
        check("b", method="all_pass", threshold=None, min_coverage=0.6),
    ]
    cases = []
    for check_id, status in statuses.items():
        cases += [c(i, check_id=check_id) for i in range(5, 10)]
        cases += [c(i, status, check_id=check_id) for i in range(5)]
    if not complete:
        cases = [
            case for case in cases if not (case["check_id"] == "a" and case["example_id"] == "e09")
        ]
    body = run(checks, cases)
    assert body["result"] == expected


def test_optional_checks_never_change_the_result() -> None:
    base = [check("a", threshold=0.5)]
    cases = passing(check_id="a")
    with_optional = [*base, check("o", threshold=0.9, required=False)]
    bad_optional = cases + [c(i, "error", check_id="o") for i in range(10)]
    assert run(base, cases)["result"] == run(with_optional, bad_optional)["result"] == "pass"
    assert run(with_optional, bad_optional)["coverage"] == {
        "expected": 10,
        "executed": 10,
        "missing": 0,
    }


def test_undigested_scored_cases_make_evidence_incomplete() -> None:
    cases = passing()
    cases[3] = {k: v for k, v in cases[3].items() if k != "output"}
    body = run([check()], cases)
    assert body["result"] == "inconclusive" and body["evidence_complete"] is False
    assert body["reasons"] == [
        {"code": "evidence_incomplete", "check_id": "c", "missing": 0, "undigested": 1}
    ]


def test_assurance_is_the_weakest() -> None:
    cases = passing()
    cases[4]["assurance"] = "reported"
    body = run(
        [check("c"), check("o", required=False)],
        cases + [c(i, check_id="o", assurance="development_unisolated") for i in range(10)],
    )
    assert body["checks"][0]["assurance"] == "reported"
    assert body["checks"][1]["assurance"] == "development_unisolated"
    assert body["assurance"] == "reported"
    assert run([check()], [])["checks"][0]["assurance"] == "development_unisolated"


def test_evidence_manifest_beyond_twenty_entries() -> None:
    cases = [c(i, evidence_refs=["sha256:" + f"{i:064x}"]) for i in range(10)]
    cases[2]["trace_ref"] = {"id": "t", "digest": "sha256:" + "f" * 64}
    result = run([check()], list(reversed(cases)))["checks"][0]
    ordered = []
    for case in cases:
        ordered.append(digest_of(case["output"]))
        if "trace_ref" in case:
            ordered.append(case["trace_ref"]["digest"])
        ordered.extend(case["evidence_refs"])
    assert len(ordered) == 21
    assert result["evidence_manifest"] is True
    assert result["evidence_refs"] == [
        "sha256:" + __import__("hashlib").sha256(rfc8785.dumps(ordered)).hexdigest()
    ]
    few = run([check()], cases[:5], n=5)["checks"][0]
    assert few["evidence_manifest"] is False and len(few["evidence_refs"]) == 11


def test_observations() -> None:
    cases = [c(i, score=0.3) for i in range(7)] + [c(7, "error"), c(8, scorer_version="2")]
    result = run([check(min_coverage=0.5)], cases)["checks"][0]
    # Seven passes: no variance, so no minimum detectable effect is shown (0/0 is no number).
    assert result["observations"] == [
        {"code": "unexecuted_error", "count": 1},
        {"code": "unexecuted_stale", "count": 1},
        {"code": "unexecuted_pending", "count": 1},
        {"code": "stale_cases", "count": 1},
        {"code": "score_ignored", "count": 7},
    ]


def test_repeats_use_bootstrap_and_fractions() -> None:
    cases = [c(i, "pass" if (i + r) % 3 else "fail", repeat=r) for i in range(10) for r in range(3)]
    result = run([check(repeats=3)], cases)["checks"][0]
    values = [sum((i + r) % 3 != 0 for r in range(3)) / 3 for i in range(10)]
    assert result["score"] == pytest.approx(np.mean(values))
    assert result["interval"]["method"].startswith("bootstrap_percentile/pcg64/")


# Degenerate data


def test_degenerate_cases() -> None:
    all_pass = run([check()], passing())["checks"][0]
    assert all_pass["score"] == 1.0 and all_pass["interval"]["upper"] == pytest.approx(
        1.0, abs=1e-12
    )
    all_fail = run([check()], [c(i, "fail") for i in range(10)])["checks"][0]
    assert (
        all_fail["score"] == 0.0
        and all_fail["interval"]["lower"] == 0.0
        and all_fail["status"] == "fail"
    )
    single = run([check()], [c(0)], n=1)["checks"][0]
    assert single["status"] == "pass" and single["coverage"]["expected"] == 1
    nothing = run([check()], [c(i, "error") for i in range(10)])["checks"][0]
    assert nothing["score"] is None and nothing["interval"] is None and nothing["status"] == "error"


# Comparisons


def comparative_suite(correction: str = "holm", margin: float = 0.0, rule: str = "non_inferiority"):
    checks = [
        check("acc", threshold=0.5, slices=[{"name": "de", "tag": "de", "required": True}]),
        check("help", method="mean", threshold=0.5, scorer="r"),
        check("safe", method="all_pass", threshold=None),
        check("opt", method="mean", threshold=0.5, scorer="r", required=False),
    ]
    return checks, {"rule": rule, "correction": correction, "margin": margin, "alpha": 0.05}


def comparative_cases(
    shift: float, seed: int, n: int = 40
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    base_scores = rng.uniform(0.2, 0.8, n)
    cand_scores = np.clip(base_scores + shift + rng.normal(0, 0.05, n), 0, 1)
    base_pass = rng.random(n) < 0.7
    cand_pass = base_pass | (rng.random(n) < 0.2)
    candidate, baseline = [], []
    for i in range(n):
        for records, scores, passes in (
            (candidate, cand_scores, cand_pass),
            (baseline, base_scores, base_pass),
        ):
            records.append(c(i, "pass" if passes[i] else "fail", check_id="acc"))
            records.append(c(i, check_id="help", score=float(scores[i])))
            records.append(c(i, check_id="safe"))
            records.append(c(i, check_id="opt", score=float(scores[i])))
    return candidate, baseline


def test_paired_comparison_matches_scipy_and_statsmodels() -> None:
    checks, rule = comparative_suite(margin=0.02)
    candidate, baseline = comparative_cases(0.03, seed=5)
    body = run(checks, candidate, n=40, rule=rule, baseline=baseline)
    assert body["decision_rule"]["family"] == ["acc", "acc/de", "help"]
    by_id = {c["check_id"]: c for c in body["checks"]}

    def differences(check_id: str, examples: range) -> np.ndarray:
        def values(records):
            out = {}
            for r in records:
                if r["check_id"] == check_id and int(r["example_id"][1:]) in examples:
                    out[r["example_id"]] = (
                        r["score"] if "score" in r else float(r["status"] == "pass")
                    )
            return out

        cand, base = values(candidate), values(baseline)
        return np.array([cand[k] - base[k] for k in sorted(cand)])

    raw = []
    for name, check_id, examples in (
        ("acc", "acc", range(40)),
        ("acc/de", "acc", range(3)),
        ("help", "help", range(40)),
    ):
        d = differences(check_id, examples)
        expected = stats.ttest_1samp(d + 0.02, 0.0, alternative="greater").pvalue
        found = (
            by_id["acc"]["slices"][0]["comparison"]
            if name == "acc/de"
            else by_id[check_id]["comparison"]
        )
        assert found["p_value"] == pytest.approx(expected, rel=1e-9)
        assert (
            found["pairs"] == d.size and found["delta0"] == -0.02 and found["method"] == "paired_t"
        )
        raw.append(found["p_value"])
    adjusted = multipletests(raw, method="holm")[1]
    assert [
        by_id["acc"]["comparison"]["p_adjusted"],
        by_id["acc"]["slices"][0]["comparison"]["p_adjusted"],
        by_id["help"]["comparison"]["p_adjusted"],
    ] == pytest.approx(list(adjusted), abs=1e-12)
    assert by_id["opt"]["comparison"]["p_adjusted"] == by_id["opt"]["comparison"]["p_value"]
    assert by_id["safe"]["comparison"] is None and by_id["safe"]["status"] == "pass"
    assert by_id["help"]["status"] == (
        "pass" if by_id["help"]["comparison"]["p_adjusted"] < 0.05 else "fail"
    )
    assert by_id["help"]["score"] == pytest.approx(differences("help", range(40)).mean())


def test_family_member_that_cannot_be_evaluated_counts_with_p_one() -> None:
    checks, rule = comparative_suite(correction="bonferroni")
    candidate, baseline = comparative_cases(0.2, seed=1)
    baseline = [
        r
        for r in baseline
        if not (r["check_id"] == "acc" and r["example_id"] in ("e00", "e01", "e02"))
    ]
    body = run(checks, candidate, n=40, rule=rule, baseline=baseline)
    acc = body["checks"][0]
    slice_de = acc["slices"][0]
    assert slice_de["comparison"]["pairs"] == 0 and slice_de["status"] == "inconclusive"
    assert slice_de["comparison"]["p_value"] == 1.0
    help_check = body["checks"][1]
    assert help_check["comparison"]["p_adjusted"] == pytest.approx(
        min(1.0, 3 * help_check["comparison"]["p_value"])
    )
    assert {"code": "unpaired", "count": 3} in acc["observations"]


def test_no_baseline_means_no_pairs() -> None:
    checks, rule = comparative_suite()
    candidate, _ = comparative_cases(0.1, seed=2)
    body = run(checks, candidate, n=40, rule=rule)
    assert body["checks"][1]["status"] == "inconclusive" and body["result"] == "inconclusive"


def test_every_difference_equal() -> None:
    checks, rule = comparative_suite(rule="superiority", correction="none")
    candidate, baseline = comparative_cases(0.0, seed=3)
    for record in baseline:
        if record["check_id"] == "help":
            match = next(
                r
                for r in candidate
                if r["check_id"] == "help" and r["example_id"] == record["example_id"]
            )
            record["score"] = match["score"] - 0.1
    body = run(checks, candidate, n=40, rule=rule, baseline=baseline)
    help_check = body["checks"][1]
    assert help_check["comparison"]["p_value"] == 0.0 and help_check["status"] == "pass"
    assert help_check["score"] == pytest.approx(0.1)


def test_an_already_failed_check_with_every_example_executed_says_failed() -> None:
    everything = run([check(method="all_pass", threshold=None)], [c(0, "fail"), *passing()[1:]])
    assert everything["checks"][0]["explanation"] == "Failed: a scored repeat failed."
    one_left = run([check(method="all_pass", threshold=None)], [c(0, "fail"), *passing(9)[1:]])
    assert one_left["checks"][0]["explanation"].endswith(
        "whatever the 1 unexecuted example would do."
    )
