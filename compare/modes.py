"""What a run does: check outputs against the oracle, time passes, or both
(`compare run --mode`; a results file records it).  Asked by meaning, not
compared as strings."""
MODES = ("correctness", "performance", "both")


def checks(mode: str) -> bool:
    """Whether a run of `mode` checks outputs against the oracle."""
    return mode != "performance"


def times(mode: str) -> bool:
    """Whether a run of `mode` times the passes."""
    return mode != "correctness"
