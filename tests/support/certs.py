"""The test certificates: they live in splitsched.testing.certs (the stack and the demo
make theirs at start); the tests import them from here."""

from splitsched.testing.certs import STACK_COMPONENTS, Issued, issue, make_ca, write_stack_certs

__all__ = ["STACK_COMPONENTS", "Issued", "issue", "make_ca", "write_stack_certs"]
