# Sourced by tests/run.sh: what the Docker tests use.
export ENVLOCK_TEST_BASE_IMAGE="${ENVLOCK_TEST_BASE_IMAGE:-envlock-test/bookworm-python:1}"
