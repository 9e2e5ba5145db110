"""The scenario language (spec section 1): what a user writes, read and checked field by field.

Sources, operators, faults, the engine section and the rules each mode sets on them; the vocabulary of steps
a fault names. Imports nothing else of ``reference/``.
"""
