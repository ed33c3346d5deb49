"""Model catalog, sessions, residency under a memory budget, precision variants, integrity."""
