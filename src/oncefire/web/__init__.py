"""The web parts: HTTP functions, the server that runs them, and the dashboard."""
