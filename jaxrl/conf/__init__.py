"""Hydra config files (loaded as package resources)."""
