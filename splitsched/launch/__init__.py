"""Run splitsched's three services as local processes, as `splitsched up` does and the
test stack (`splitsched.testing.stack`) builds on: the rights each component needs
(`rights`), their certificates (`certs`), starting, waiting for and stopping the
processes (`processes`, `orphanguard`) and stopping on SIGTERM as on Ctrl-C
(`interrupts`). Product code: it imports nothing from the test tooling.
"""
