"""The protocol (spec sections 2 and 3): what a query does, step by step, and what it leaves in its checkpoint.

The step graph, the incarnation and its parts (clock, driver steps, task effects, recovery), the logs, the
state store and storage, and the outcome an observer records. Imports the language, never the judge.
"""
