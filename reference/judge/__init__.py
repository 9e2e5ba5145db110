"""The judge (spec section 5): what an outcome and a checkpoint must be, and the explorer that searches for one
that is not.

Oracles, the bounds they enforce, whether each bound is reached, the checkpoint rules. Reads the protocol and
the language.
"""
