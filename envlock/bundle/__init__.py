"""Files copied verbatim into every bundle (standard library only, Python 3.8+)."""
