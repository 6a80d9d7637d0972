"""What Firebase's HTTP functions need beyond Starlette: a real `flask.Request` and Flask
return values (flask_bridge.py), CORS (cors.py), the callable protocol (callables.py) and
who a callable's writes are by (auth_context.py)."""
