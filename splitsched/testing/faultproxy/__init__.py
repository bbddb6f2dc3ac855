"""A fault-injecting HTTP proxy in front of the real kube-apiserver, for the fault tests.

``tests/faults`` points the binders' and the watcher's kubeconfigs at a ``FaultProxy``
(``proxied_kubeconfig``): the services speak plain HTTP to ``127.0.0.1:<port>``, the proxy
forwards every request to the API server over HTTPS (trusting the control plane's CA) with
the client's bearer token passed through, and streams responses back chunk by chunk, so
watches work through it. Tests change the rules at runtime (``add_rule``, ``clear_rules``)
while the services run:

* ``LATENCY``: delay the request ``seconds`` before forwarding it (added to other faults);
* ``ERROR``: answer ``status`` (a 5xx; or 410 Gone on a watch) with a Status body, unforwarded;
* ``THROTTLE``: answer 429 with ``Retry-After: seconds``, without forwarding;
* ``RESET``: close the client's connection with a TCP reset, without forwarding;
* ``LOSE_RESPONSE``: forward, read the real answer, then reset the client's connection
  (the classic lost Binding response: the pod is bound, the binder never hears it);
* ``cut_watches()``: abort every open streaming response (watches) now.

A rule matches by method and path regex and fires with a probability, at most ``count``
times. Every exchange is logged (``exchanges``), so a test can prove from the wire that no
pod got two Bindings accepted (``accepted_bindings``). The proxy runs its own asyncio loop
in a background thread, so synchronous tests can drive it. Test tooling, not product code.

Modules: ``rules`` (the faults and which one fires, pure), ``exchanges`` (the log and what
it proves, pure), ``kubeconfig`` (in front of which server, and the proxied copy) and
``server`` (``FaultProxy``, the aiohttp server). This package re-exports what tests use.
"""

from splitsched.testing.faultproxy.exchanges import Exchange, ExchangeLog
from splitsched.testing.faultproxy.kubeconfig import proxied_kubeconfig, upstream_of
from splitsched.testing.faultproxy.rules import Fault, Rule, RuleBook
from splitsched.testing.faultproxy.server import FaultProxy

__all__ = [
    "Exchange",
    "ExchangeLog",
    "Fault",
    "FaultProxy",
    "Rule",
    "RuleBook",
    "proxied_kubeconfig",
    "upstream_of",
]
