"""The exit codes of the ``lightspeed`` command line: one scheme for every subcommand.

Library code never exits; it raises typed errors, and only the command line's
``main`` (``experiments/cli.py``) turns them into a message and one of these.
"""

from __future__ import annotations

OK = 0              # everything asked for ran, and every check and oracle held
CHECK_FAILED = 1    # an oracle or sanity check failed, backends disagree, or an exploration found a violation
BAD_INPUT = 2       # a bad argument, scenario, outcome, profile or checkpoint directory; a refused scenario
UNAVAILABLE = 3     # a backend cannot run on this machine (no Java, no pyspark, ...)
INTERRUPTED = 130   # stopped by an interrupt (Ctrl-C, after saying where it got to) or a closed output (| head)

SCHEME = (f"exit codes: {OK} ok; {CHECK_FAILED} a check or oracle failed (or the exploration was incomplete); "
          f"{BAD_INPUT} bad input (arguments, scenario, outcome, profile, checkpoint directory, or a backend "
          f"refused the scenario); {UNAVAILABLE} a backend is not available here; {INTERRUPTED} interrupted (or its "
          "output closed)")


def worst(*codes: int) -> int:
    """One exit code for several results: a failed check first, then an unavailable backend, then bad input."""
    for code in (INTERRUPTED, CHECK_FAILED, UNAVAILABLE, BAD_INPUT):
        if code in codes:
            return code
    return OK
