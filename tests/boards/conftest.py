"""A board bundle of the standard suite's four subjects, made once per module."""
