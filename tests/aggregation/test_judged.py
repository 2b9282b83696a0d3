"""Judged checks (docs/judges.md): PPI++ against ppi-python 0.2.3 (the oracle, to 1e-9), kappa
against scikit-learn, the label sample against a plain loop, the engine's corrected verdicts,
and the seeded coverage simulation of section 6."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import ppi_py
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from app.aggregation.agreement import pass_fail_agreement
from app.aggregation.engine import aggregate
from app.aggregation.inputs import ASSURANCE_CODE, InvalidInput, LabelColumns
from app.aggregation.label_input import StoredLabels, label_columns, stored_label_columns
from app.aggregation.ppi import ppi_mean
from app.digest.canonical import canonical_bytes
from app.domain.labels import in_sample, label_leaf, label_value, labels_root, sampled_ids
from tests.aggregation_helpers import build_input, dataset_index, freeze

SCORER = {"name": "judge", "version": "1", "definition": {"kind": "llm"}}
CALIBRATION = {"method": "ppi", "label_fraction": 0.2, "min_labels": 30, "sample_seed": "qa"}


def _arrays(seed: int, n: int, big_n: int, binary: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    if binary:
        truth = (rng.random(n + big_n) < 0.8).astype(float)
        flips = rng.random(n + big_n) < 0.1
        judged = np.where(flips, 1.0 - truth, truth)
    else:
        truth = rng.normal(0.6, 0.2, n + big_n)
        judged = truth + rng.normal(0.1, 0.1, n + big_n)
    return truth[:n], judged[:n], judged[n:]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_ppi_matches_ppi_python(seed: int, binary: bool) -> None:
    labels, judged, unlabelled = _arrays(seed, 40 + 30 * seed, 400 + 200 * seed, binary)
    found = ppi_mean(labels, judged, unlabelled)
    theta = ppi_py.ppi_mean_pointestimate(labels, judged, unlabelled, lam=None)
    lower, upper = ppi_py.ppi_mean_ci(labels, judged, unlabelled, alpha=0.05, lam=None)
    assert found.theta == pytest.approx(float(np.asarray(theta).item()), abs=1e-9)
    mine = found.interval(0.05)
    assert mine[0] == pytest.approx(float(lower[0]), abs=1e-9)
    assert mine[1] == pytest.approx(float(upper[0]), abs=1e-9)
    for null in (0.5, 0.7, 0.9):
        p = ppi_py.ppi_mean_pval(
            labels, judged, unlabelled, null=null, alternative="larger", lam=found.lam
        )
        assert found.p_larger(null) == pytest.approx(float(np.asarray(p).item()), abs=1e-9)


def test_everything_labelled_is_the_classical_z_interval() -> None:
    labels, judged, _ = _arrays(3, 80, 0, True)
    found = ppi_mean(labels, judged, np.empty(0))
    z = stats.norm.ppf(0.975)
    se = labels.std() / np.sqrt(labels.size)
    assert found.lam == 0.0 and found.unlabelled == 0
    assert found.interval(0.05) == pytest.approx((labels.mean() - z * se, labels.mean() + z * se))


def test_a_constant_judge_gives_lambda_zero_the_labels_alone() -> None:
    labels = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    found = ppi_mean(labels, np.ones(6), np.ones(50))
    assert found.lam == 0.0
    assert found.theta == pytest.approx(labels.mean())
    lower, upper = ppi_py.ppi_mean_ci(labels, np.ones(6), np.ones(50), alpha=0.1, lam=0.0)
    assert found.interval(0.1) == pytest.approx((lower[0], upper[0]))


@pytest.mark.parametrize("seed", range(5))
def test_kappa_matches_scikit_learn(seed: int) -> None:
    labels, judged, _ = _arrays(seed, 120, 0, True)
    found = pass_fail_agreement(judged, labels)
    assert found["kappa"] == pytest.approx(cohen_kappa_score(judged, labels), abs=1e-9)
    table = found["table"]
    assert sum(table.values()) == 120
    label_pass = labels == 1.0
    assert found["sensitivity"] == pytest.approx((judged[label_pass] == 1.0).mean(), abs=1e-11)
    assert found["specificity"] == pytest.approx((judged[~label_pass] == 0.0).mean(), abs=1e-11)


def _plain_draw(seed: str, check_id: str, example_id: str) -> float:
    message = b"evalbook.label-sample.v1\0" + seed.encode() + b"\0" + check_id.encode() + b"\0"
    digest = hashlib.sha256(message + example_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def test_the_sample_is_the_plain_loops() -> None:
    ids = [f"ex-{i:05d}" for i in range(3000)]
    expected = [e for e in ids if _plain_draw("qa", "accuracy", e) < 0.2]
    index = dataset_index({"examples": [{"id": e, "tags": []} for e in ids]})
    mask = index.label_sample("qa", "accuracy", 0.2)
    assert [ids[i] for i in np.flatnonzero(mask)] == expected
    assert sampled_ids(CALIBRATION, "accuracy", ids) == expected
    assert all(in_sample(CALIBRATION, "accuracy", e) for e in expected)
    assert 450 < len(expected) < 750
    # Another check, seed or fraction draws another sample.
    assert index.label_sample("qa", "other", 0.2).tolist() != mask.tolist()
    assert index.label_sample("qb", "accuracy", 0.2).tolist() != mask.tolist()


def _judged_suite(
    method: str = "pass_rate", threshold: float = 0.75, rule: str = "threshold", **extra: Any
) -> dict[str, Any]:
    return {
        "decision_rule": {"rule": rule, "alpha": 0.05, "margin": 0.05},
        "checks": [
            {
                "check_id": "accuracy",
                "scorer": {"name": "judge", "version": "1"},
                "dataset": {"name": "qa", "version": "1"},
                "aggregation": {"method": method, "threshold": threshold},
                "calibration": dict(CALIBRATION, **extra),
            }
        ],
    }


def _dataset(n: int) -> dict[str, Any]:
    return {
        "name": "qa",
        "version": "1",
        "examples": [{"id": f"q{i:05d}", "body": {"i": i}, "tags": []} for i in range(n)],
    }


def _world(n: int, seed: int, false_pass: float = 0.4) -> tuple[dict[str, bool], dict[str, bool]]:
    """Truth and a lenient judge: it passes `false_pass` of the bad answers."""
    rng = np.random.default_rng(seed)
    truth, judge = {}, {}
    for i in range(n):
        good = bool(rng.random() < 0.7)
        truth[f"q{i:05d}"] = good
        judge[f"q{i:05d}"] = good or bool(rng.random() < false_pass)
    return truth, judge


def _labels(
    truth: dict[str, bool], sampled: list[str], labeller: str = "ann"
) -> tuple[LabelColumns, list[dict[str, Any]]]:
    rows = [
        {
            "check_id": "accuracy",
            "example_id": e,
            "label": "pass" if truth[e] else "fail",
            "labeller": labeller,
            "assurance": "human_attested",
        }
        for e in sampled
    ]
    ids = sorted(truth)
    position = {e: i for i, e in enumerate(ids)}
    columns = LabelColumns(
        np.array([position[r["example_id"]] for r in rows], np.int32),
        np.array([1.0 if r["label"] == "pass" else 0.0 for r in rows]),
        np.full(len(rows), ASSURANCE_CODE["human_attested"], np.int8),
        labels_root(rows),
    )
    return columns, rows


def _judged_input(content: dict[str, Any], dataset: dict[str, Any], judge: dict[str, bool]) -> Any:
    cases = [
        {"check_id": "accuracy", "example_id": e, "repeat": 0, "status": "pass" if ok else "fail"}
        for e, ok in judge.items()
    ]
    return build_input(content, dataset, [SCORER], cases, edition=3)


def test_a_lenient_judge_is_corrected_by_its_labels() -> None:
    truth, judge = _world(1000, 7)
    dataset = _dataset(1000)
    content = freeze(_judged_suite(threshold=0.75), dataset, [SCORER])
    sampled = sampled_ids(CALIBRATION, "accuracy", sorted(truth))
    columns, rows = _labels(truth, sampled)
    inp = _judged_input(content, dataset, judge)
    result = aggregate(type(inp)(**{**inp.__dict__, "labels": {"accuracy": columns}})).body
    check = result["checks"][0]
    ids = sorted(truth)
    y = np.array([float(truth[e]) for e in sampled])
    yhat_l = np.array([float(judge[e]) for e in sampled])
    yhat_u = np.array([float(judge[e]) for e in ids if e not in set(sampled)])
    theta = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat_l, yhat_u)).item())
    lower, upper = ppi_py.ppi_mean_ci(y, yhat_l, yhat_u, alpha=0.05)
    assert check["score"] == pytest.approx(theta, abs=1e-9)
    assert check["interval"]["method"] == "ppi_plus_plus_z"
    assert check["interval"]["lower"] == pytest.approx(max(0.0, lower[0]), abs=1e-9)
    assert check["interval"]["upper"] == pytest.approx(min(1.0, upper[0]), abs=1e-9)
    assert check["interval"]["labelled"] == len(sampled)
    assert check["interval"]["unlabelled"] == 1000 - len(sampled)
    calibration = check["calibration"]
    judge_score = np.mean([float(v) for v in judge.values()])
    assert calibration["judge_score"] == pytest.approx(judge_score, abs=1e-11)
    assert calibration["labels_root"] == labels_root(rows)
    assert calibration["sample_seed"] == "qa" and calibration["labelled"] == len(sampled)
    assert calibration["agreement"]["kappa"] == pytest.approx(
        cohen_kappa_score(yhat_l, y), abs=1e-9
    )
    # The judge says ~0.82 and passes; the labels say ~0.70 and fail it.
    assert judge_score > 0.75 > check["score"]
    assert check["status"] == "fail" and result["result"] == "fail"
    assert any(o["code"] == "judge_bias" for o in check["observations"])
    assert check["coverage"]["labels_missing"] == 0
    # The cases are platform_verified; the labels, weaker, set the check's assurance.
    assert check["assurance"] == "human_attested"


def test_too_few_labels_is_inconclusive_and_a_missing_label_is_incomplete() -> None:
    truth, judge = _world(1000, 8)
    dataset = _dataset(1000)
    content = freeze(_judged_suite(threshold=0.5), dataset, [SCORER])
    sampled = sampled_ids(CALIBRATION, "accuracy", sorted(truth))
    inp = _judged_input(content, dataset, judge)
    few, _ = _labels(truth, sampled[:10])
    body = aggregate(type(inp)(**{**inp.__dict__, "labels": {"accuracy": few}})).body
    check = body["checks"][0]
    assert (check["status"], body["result"]) == ("inconclusive", "inconclusive")
    assert body["reasons"][0]["step"] == "too_few_labels"
    assert "10 counting labels" in check["explanation"]
    assert check["coverage"]["labels_missing"] == len(sampled) - 10
    # All but one labelled: decided by its labels, but the report cannot pass.
    most, _ = _labels(truth, sampled[1:])
    body = aggregate(type(inp)(**{**inp.__dict__, "labels": {"accuracy": most}})).body
    check = body["checks"][0]
    assert check["status"] == "pass" and body["result"] == "inconclusive"
    assert not body["evidence_complete"]
    assert {"code": "labels_missing", "check_id": "accuracy", "missing": 1} in body["reasons"]
    assert body["coverage"]["labels_missing"] == 1


def test_a_label_outside_the_sample_is_refused_by_the_engine() -> None:
    truth, judge = _world(200, 9)
    dataset = _dataset(200)
    content = freeze(_judged_suite(min_labels=2), dataset, [SCORER])
    outside = [e for e in sorted(truth) if not in_sample(CALIBRATION, "accuracy", e)][:3]
    columns, _ = _labels(truth, outside)
    inp = _judged_input(content, dataset, judge)
    with pytest.raises(InvalidInput, match="outside its sample"):
        aggregate(type(inp)(**{**inp.__dict__, "labels": {"accuracy": columns}}))


def test_a_paired_comparison_is_ppi_on_the_differences() -> None:
    truth, judge = _world(1500, 10)
    base_truth, base_judge = _world(1500, 11)
    dataset = _dataset(1500)
    content = freeze(_judged_suite(rule="non_inferiority", threshold=0.5), dataset, [SCORER])
    ids = sorted(truth)
    sampled = sampled_ids(CALIBRATION, "accuracy", ids)
    mine, _ = _labels(truth, sampled)
    theirs, _ = _labels(base_truth, sampled)
    cases = [
        {"check_id": "accuracy", "example_id": e, "repeat": 0, "status": "pass" if ok else "fail"}
        for e, ok in judge.items()
    ]
    baseline = [
        {"check_id": "accuracy", "example_id": e, "repeat": 0, "status": "pass" if ok else "fail"}
        for e, ok in base_judge.items()
    ]
    inp = build_input(content, dataset, [SCORER], cases, baseline=baseline, edition=3)
    inp = type(inp)(
        **{**inp.__dict__, "labels": {"accuracy": mine}, "baseline_labels": {"accuracy": theirs}}
    )
    check = aggregate(inp).body["checks"][0]
    chosen = set(sampled)
    d = np.array([float(truth[e]) - float(base_truth[e]) for e in sampled])
    dhat = np.array([float(judge[e]) - float(base_judge[e]) for e in ids])
    dhat_l = np.array([float(judge[e]) - float(base_judge[e]) for e in sampled])
    dhat_u = np.array([v for e, v in zip(ids, dhat, strict=True) if e not in chosen])
    theta = float(np.asarray(ppi_py.ppi_mean_pointestimate(d, dhat_l, dhat_u)).item())
    lower, _ = ppi_py.ppi_mean_ci(d, dhat_l, dhat_u, alpha=0.05)
    lam = check["interval"]["lambda"]
    p = ppi_py.ppi_mean_pval(d, dhat_l, dhat_u, null=-0.05, alternative="larger", lam=lam)
    assert check["score"] == pytest.approx(theta, abs=1e-9)
    assert check["interval"]["lower"] == pytest.approx(lower[0], abs=1e-9)
    assert check["comparison"]["method"] == "ppi_plus_plus_z"
    assert check["comparison"]["p_value"] == pytest.approx(float(np.asarray(p).item()), abs=1e-9)


def test_label_leaves_bind_every_bound_field() -> None:
    label = {
        "check_id": "accuracy",
        "example_id": "q1",
        "label": "pass",
        "labeller": "ann",
        "assurance": "human_attested",
    }
    leaf = label_leaf(label)
    for key, other in (("label", "fail"), ("labeller", "bob"), ("example_id", "q2")):
        assert label_leaf({**label, key: other}) != leaf
    assert label_leaf({**label, "note": "anything"}) == leaf


@pytest.mark.parametrize(
    "label",
    ["pass", "fail", 0.0, 1.0, 0.25, 1e-7, 123456789.125, 1e21, -0.5],
)
def test_the_finishs_stored_leaves_are_the_label_leaves(label: Any) -> None:
    """The finish writes each leaf from the stored canonical label (StoredLabels.leaves); it
    must be app.domain.labels.label_leaf's bytes, and the root labels_root's."""
    ids = ["a", "b.2", "c:3-x", "d_4", "Z"]
    labels = [
        {
            "check_id": "acc.v2",
            "example_id": example_id,
            "label": label,
            "labeller": f"ann-{i}",
            "assurance": "human_attested" if i % 2 else "platform_verified",
        }
        for i, example_id in enumerate(sorted(ids, key=str.encode))
    ]
    stored = StoredLabels(
        [item["example_id"] for item in labels],
        [canonical_bytes(item["label"]).decode() for item in labels],
        [label_value(item["label"]) for item in labels],
        [item["labeller"] for item in labels],
        [item["assurance"] for item in labels],
        [None] * len(labels),
        [None] * len(labels),
    )
    assert stored.leaf_hashes("acc.v2") == [label_leaf(item) for item in labels]
    dataset = dataset_index({"examples": [{"id": i, "tags": []} for i in ids]})
    columns = stored_label_columns("acc.v2", stored, dataset)
    assert columns.root == labels_root(labels)
    reference = label_columns(labels, dataset)
    assert np.array_equal(columns.example_index, reference.example_index)
    assert np.array_equal(columns.value, reference.value)
    assert np.array_equal(columns.assurance, reference.assurance)


def _coverage_run(rng: np.random.Generator, n_total: int, fraction: float) -> tuple[bool, ...]:
    """One simulated judged check: does each interval cover the true rate; is PPI's narrower
    than the labels' own?"""
    truth = rng.random(n_total) < 0.7
    judge = truth | (rng.random(n_total) < 0.3)
    judge &= ~(truth & (rng.random(n_total) < 0.05))
    labelled = rng.random(n_total) < fraction
    y, yhat = truth.astype(float), judge.astype(float)
    true_rate = 0.7
    estimate = ppi_mean(y[labelled], yhat[labelled], yhat[~labelled])
    lower, upper = estimate.interval(0.05)
    naive = stats.binomtest(int(judge.sum()), n_total).proportion_ci(0.95, method="wilson")
    labels_only = ppi_mean(y[labelled], yhat[labelled], np.empty(0)).interval(0.05)
    agreement = float((y[labelled] == yhat[labelled]).mean())
    narrower = (upper - lower) < (labels_only[1] - labels_only[0])
    return (
        lower <= true_rate <= upper,
        naive.low <= true_rate <= naive.high,
        agreement < 0.8 or narrower,
    )


def test_the_simulation_of_section_6_ppi_covers_and_the_judge_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = np.random.default_rng(20261205)
    runs = np.array([_coverage_run(rng, 1000, 0.15) for _ in range(2000)])
    ppi_coverage, judge_coverage = runs[:, 0].mean(), runs[:, 1].mean()
    with capsys.disabled():
        print(
            f"\ncoverage at 95 %, 2,000 runs: uncorrected {judge_coverage:.3f}, "
            f"PPI++ {ppi_coverage:.3f}"
        )
    assert ppi_coverage >= 0.93
    assert judge_coverage < 0.5
    assert runs[:, 2].all()
