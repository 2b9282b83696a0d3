"""EvalBook Reports: turns finished evaluations into immutable, digested verdicts."""

__version__ = "0.1.0"
