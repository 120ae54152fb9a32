"""EXPERIMENT (not part of make bench or make test): run the test suite against the patched copy.

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -p proto_plugin tests/test_model.py ...

Imported by pytest before the tests' conftest, so ``mysql_state`` names ``mysql_state_proto``
in the test process (child processes a test starts run today's store: the two must agree, as in
a rolling upgrade, which the prototype's unchanged row formats allow without PROTO_BLAKE3).
"""
import proto_alias  # noqa: F401  (the alias is made at import)
