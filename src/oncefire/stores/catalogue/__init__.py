"""The function catalogue: register, touch, pause, resume and forget functions, and route
events to them. contract.py is the protocol; sql.py implements it on both databases."""
