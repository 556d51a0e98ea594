"""The package index: where it is, how envlock talks to it, what it lists.

``config`` reads the index location and pip's settings (the user's pip/uv
configuration, or --index-url); ``http`` is the one requests session (bounded
reads, retries, errors mapped to exit 3); ``pep691`` reads a project's PEP 691
JSON listing. Nothing is imported here: requests stays inside the functions
that use it.
"""
