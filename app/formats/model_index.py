"""A report as the `model-index` block of a Hugging Face model card: one result per scored
check, its interval in the metric's `args`, never `verified`, its source the report's page
(`huggingface_hub.repocard_data.model_index_to_eval_results` reads it back)."""

from __future__ import annotations

from typing import Any

import yaml

from app.domain.reports import subject_name
from app.formats.test_result import report_page

# libyaml's emitter where PyYAML was built with it (the wheels are): five times the pure one.
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def model_index(body: dict[str, Any], suite_content: dict[str, Any], base: str) -> list[Any]:
    """The `model-index` value: the subject as the model, a result per check with a score."""
    suite = body["suite_ref"]
    by_id = {c["check_id"]: c for c in suite_content["checks"]}
    # A measure check's examples are those of the check it measures.
    datasets = {
        check_id: (c if "measure" not in c else by_id[c["measure"]["of"]])["dataset"]
        for check_id, c in by_id.items()
    }
    source = {
        "name": f"EvalBook report {body['report_id']}",
        "url": report_page(base, body["report_id"]),
    }
    results = []
    for check in body["checks"]:
        if check["score"] is None:
            continue
        dataset = datasets[check["check_id"]]
        metric: dict[str, Any] = {
            "type": f"evalbook/{check['aggregation']['method']}",
            "value": check["score"],
            "name": check["check_id"],
            "verified": False,
            "args": {"result": check["result"], "required": check["required"]},
        }
        if check["interval"] is not None:
            metric["args"]["interval"] = check["interval"]
        results.append(
            {
                "task": {
                    "type": suite["name"],
                    "name": f"{suite['name']} version {suite['version']}",
                },
                "dataset": {
                    "type": dataset["name"],
                    "name": dataset["name"],
                    "revision": dataset["version"],
                },
                "metrics": [metric],
                "source": dict(source),
            }
        )
    name = subject_name(body["subject"]) or str(body["subject"]["digest"])
    return [{"name": name, "results": results}]


def model_index_yaml(body: dict[str, Any], suite_content: dict[str, Any], base: str) -> bytes:
    """The YAML to paste into a model card's front matter (`model-index:` and its value)."""
    document = {"model-index": model_index(body, suite_content, base)}
    text: str = yaml.dump(document, Dumper=DUMPER, sort_keys=False, allow_unicode=True)
    return text.encode()
