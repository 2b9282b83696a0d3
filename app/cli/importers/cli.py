"""The arguments of `evalbook import` (light: the command line parses them without httpx)."""

from __future__ import annotations

import argparse

from app.cli.registry import Client, Command


def _import(args: argparse.Namespace) -> int:
    from app.cli.importers.run import cmd_import  # httpx and the readers, when it runs

    return cmd_import(args)


# Long: the import command's options written out, one add_argument each, so that one
# place reads as its reference.
def _options(command: argparse.ArgumentParser) -> None:
    command.add_argument("tool", choices=["inspect", "lm-eval", "promptfoo"])
    command.add_argument("files", nargs="+", metavar="FILE")
    command.add_argument(
        "--subject", required=True, help='what was evaluated: {"digest": …} or digest=sha1:…,name=…'
    )
    command.add_argument(
        "--suite",
        help="the suite's name, made an identifier (letters, digits, _ . : -; the import prints "
        "the name it used); default: the run's task, its tasks joined by dots, or its title",
    )
    rule = command.add_argument_group("suite-rule options")
    rule.add_argument(
        "--threshold",
        type=float,
        required=True,
        help="the score (pass rate or mean) every check must reach",
    )
    rule.add_argument(
        "--check-threshold",
        action="append",
        default=[],
        metavar="CHECK=VALUE",
        help="one check's own threshold, instead of --threshold (repeatable)",
    )
    rule.add_argument(
        "--rule",
        default="threshold",
        choices=["threshold", "interval", "non_inferiority", "superiority"],
        help="how a check decides: its score against the threshold, its interval, or a "
        "paired comparison with --baseline",
    )
    rule.add_argument("--alpha", type=float, default=0.05, help="the tests' level, in (0, 0.5]")
    rule.add_argument(
        "--margin", type=float, default=0.0, help="the comparison's margin, in [0, 1]"
    )
    rule.add_argument(
        "--correction",
        default="none",
        choices=["none", "bonferroni", "holm"],
        help="the family-wise correction across checks",
    )
    rule.add_argument(
        "--min-coverage",
        type=float,
        default=1.0,
        help="the share of expected cases a check needs, in [0, 1]",
    )
    rule.add_argument("--min-samples", type=int, default=1, help="examples a check needs")
    rule.add_argument(
        "--validity-hours", type=float, default=168.0, help="how long a report stays valid"
    )
    rule.add_argument(
        "--measure-check",
        action="append",
        default=[],
        metavar="SPEC",
        help="a check of a measure the tool recorded (latency_ms, cost_usd, input_tokens, "
        "output_tokens, total_tokens): NAME[@CHECK]:quantile:Q:THRESHOLD[:lower] (e.g. "
        "latency_ms:quantile:0.95:2000:lower) or NAME[@CHECK]:mean:THRESHOLD[:lower]; CHECK "
        "is the check whose cases carry it (default: the first); repeatable",
    )
    rule.add_argument(
        "--optional",
        action="append",
        default=[],
        metavar="CHECK",
        help="a check that does not decide the result",
    )
    rule.add_argument(
        "--slice",
        action="append",
        default=[],
        metavar="TAG",
        help="report the examples with this tag (e.g. lang:de) on their own",
    )
    judged = command.add_argument_group(
        "human labels (Inspect): a check whose samples carry them is judged, its score "
        "corrected by the labels of a hash-chosen sample (docs/importing.md)"
    )
    judged.add_argument(
        "--label-scorer",
        metavar="HUMAN[=CHECK]",
        help="the scorer whose scores are people's labels of CHECK (default: the only other "
        "scorer), not a check of its own; a score's metadata.human_label is read without it",
    )
    judged.add_argument(
        "--label-fraction",
        type=float,
        default=0.1,
        help="the share of examples a judged check samples for labels, in (0, 1]",
    )
    judged.add_argument(
        "--min-labels", type=int, default=30, help="the fewest labels a judged verdict needs"
    )
    judged.add_argument(
        "--labeller", help="who labelled, where the log does not say (default: the label scorer)"
    )
    judged.add_argument(
        "--label-token",
        help="a labeller token, attesting that people labelled (default: EVALBOOK_LABEL_TOKEN)",
    )
    command.add_argument(
        "--baseline",
        metavar="EVALUATION_ID",
        help="compare with this finished evaluation of the same suite version",
    )
    command.add_argument(
        "--mode",
        default=None,
        choices=["gate", "experiment", "exploratory"],
        help="the evaluation's mode (default: gate, which `evalbook gate` reads, with or "
        "without --baseline; experiment for a baseline run: a comparing --rule without "
        "--baseline). The import prints the mode it chose and why",
    )
    command.add_argument(
        "--execution-mode",
        default="external",
        choices=["platform", "external", "local"],
        help="where the run's cases ran (it bounds the assurance they may claim)",
    )
    command.add_argument(
        "--activate",
        action="store_true",
        help="when the run's options make a new version of a suite that has another version "
        "active, activate it on purpose (the current reports under the old version are "
        "superseded; they are listed first); without it such an import is refused",
    )
    command.add_argument("--dry-run", action="store_true", help="print what would be created")
    command.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bars on stderr (default: when stderr is a terminal)",
    )


COMMANDS = [
    Command(
        ("import",),
        "import another tool's run as a report",
        _import,
        _options,
        epilog="exits 0 when the report was issued (whatever its result); 2 when a file or the "
        "service refused the import (nothing is left half-made); 64 for an option it cannot "
        "use; 66 when a file does not exist",
        client=Client("scorer.write, dataset.write, suite.write, evaluation.write and report.read"),
    )
]
