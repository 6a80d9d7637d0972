"""How a Firebase-style function becomes an oncefire function: the implicit default App it
registers on and `initialize_app` (apps.py), the CloudEvent it receives (cloudevent.py), and
a task queue's settings as oncefire's options (queue_options.py)."""
