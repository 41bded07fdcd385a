"""The ground floor: what every other floor may import and which imports nothing of lexkit above it
(specs and registries, errors, checks, settings as fields, devices, threads, progress, notation,
statistics, locks, provenance, the version)."""
