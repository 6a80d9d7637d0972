"""The orders story of `oncefire demo`, runnable from a checkout: `python examples/orders.py`.

The app lives in the package (`oncefire.demo`), so `oncefire demo` works after a plain
`pip install`; serve it with `oncefire worker oncefire.demo:app`.
"""

from oncefire.demo import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
