"""Spur: a Slurm-compatible job scheduler on Trio."""
