#!/usr/bin/env bash
# Regenerates the lm-evaluation-harness output here with lm-eval itself, offline: two tiny tasks
# read from local files, run on lm-eval's `dummy` model (random log-likelihoods, "lol" for every
# generation), with --log_samples. Needs lm-eval (and torch) in LM_EVAL_PYTHON's environment.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${LM_EVAL_PYTHON:-python3}"
out="$(mktemp -d)"
cd "$here/tasks"
HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 "$python" -m lm_eval --model dummy \
  --tasks tiny_mc,tiny_gen --include_path "$here/tasks" --seed 1234 \
  --log_samples --output_path "$out"
rm -rf "$here/output" && mkdir -p "$here/output"
find "$out" -name '*.json*' -exec cp {} "$here/output/" \;
cd "$here/output"
for f in samples_*.jsonl; do mv "$f" "$(echo "$f" | sed -E 's/_[0-9T:.-]+\.jsonl$/.jsonl/')"; done
for f in results_*.json; do mv "$f" results.json; done
"$python" -c 'import importlib.metadata as m; print("lm-eval", m.version("lm-eval")); print("torch", m.version("torch"))' > "$here/VERSION"
