"""Media I/O: probe, decode, encode, audio, resumable segments, atomic output (PyAV)."""
