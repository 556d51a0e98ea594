"""Images: the Docker Engine client, image references, build, labels, push, registry.

``engine`` makes, checks and closes the one Docker client; ``ref`` parses an
image reference once (the parsed ``ImageRef`` is passed on, never the text);
``build`` and ``push`` drive the engine (OCI labels from ``labels``);
``registry`` speaks the OCI distribution API v2, with ``registry_auth`` for
Docker's stored credentials. Nothing is imported here: docker-py and requests
stay inside the functions that use them.
"""
