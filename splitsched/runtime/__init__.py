"""Plumbing shared by the three services: configuration, logs, gRPC and HTTP servers.

Services import this package, never each other; the pure core never imports it.
"""
