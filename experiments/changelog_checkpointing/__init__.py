"""The changelog-checkpointing experiment, one folder: definition (its points, measurements, summary, checks and figures;
EXPERIMENT), claims (the published numbers it judges; CLAIMS) and section (its part of the paper;
write). experiments.registry lists it by one line."""
