"""Shapes of oncefire's data and the pure rules over them: no I/O, no clock reads."""
