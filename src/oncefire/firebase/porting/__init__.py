"""`oncefire port`: a Firebase main.py's imports rewritten for oncefire.firebase (rewrite.py)."""
