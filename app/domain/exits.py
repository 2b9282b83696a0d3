"""The exit statuses of every `evalbook` command, one table (docs/cli.md, "Exit statuses").

The low numbers are outcomes (what a gate or a verifier found); the high ones follow BSD's
sysexits where one fits. The service being out of reach is 4, not sysexits' 69: the gate has
said 4 for that since its first release and CI jobs test for it, and 69 is the gate's "the
service cannot be trusted" (--verify-log)."""

from __future__ import annotations

OK = 0
FAILED = 1  # a gate's suite fails; a bundle fails verification
REFUSED = 2  # the input was refused (a file, an option, a request the service would not take)
MISSING = 3  # the gate: a suite has no current report
UNAVAILABLE = 4  # the service cannot answer: unreachable, 5xx
USAGE = 64  # the command line is wrong (sysexits EX_USAGE)
NOT_FOUND = 66  # a file, report or evaluation that does not exist (sysexits EX_NOINPUT)
UNTRUSTED = 69  # gate --verify-log: the service's reports cannot be trusted
NO_PERMISSION = 77  # no token, a token refused or lacking a permission (sysexits EX_NOPERM)

TABLE = """exit statuses (every evalbook command):
  0  done (a gate: every suite passes; a bundle: proven)
  1  a gate's suite fails; a bundle fails verification
  2  refused: a file, an option or a request the service would not take (a gate: error or
     inconclusive; verify-bundle: not a bundle)
  3  gate: a suite has no current report
  4  the service cannot answer (unreachable, 5xx)
  64 the command line is wrong
  66 not found: a file, report or evaluation that does not exist
  69 gate --verify-log: the service cannot be trusted
  77 no permission: no token, a token the service refused, or one lacking a permission"""


def for_status(status: int | None) -> int:
    """The exit status of a request the service refused with this HTTP status (None: it did not
    answer)."""
    if status is None or status >= 500:
        return UNAVAILABLE
    if status in (401, 403):
        return NO_PERMISSION
    if status == 404:
        return NOT_FOUND
    return REFUSED
