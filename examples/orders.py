"""The orders story of `oncefire demo`, runnable from a checkout: `python examples/orders.py`.

The app lives in the package (`oncefire.demo.orders`), so `oncefire demo` works after a plain
`pip install`; serve it with `oncefire worker oncefire.demo.orders:app`.
"""

from oncefire.demo.orders import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
