"""The bundled demos that `oncefire demo` runs."""
