"""ffdesk: desktop face-swap studio."""

__version__ = "0.1.0"
