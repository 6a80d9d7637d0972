"""Scripts for people working on oncefire (not shipped in the package)."""
