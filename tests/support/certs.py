"""The test certificates: they live in splitsched.launch.certs (`splitsched up`, the
stack and the demo make theirs at start); the tests import them from here."""

from splitsched.launch.certs import STACK_COMPONENTS, Issued, issue, make_ca, write_stack_certs

__all__ = ["STACK_COMPONENTS", "Issued", "issue", "make_ca", "write_stack_certs"]
