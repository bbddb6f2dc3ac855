"""The fault proxy's decisions without a server: which rule fires for a request
(``RuleBook``) and what the exchange log proves (``ExchangeLog``)."""

from __future__ import annotations

import pytest

from splitsched.testing.faultproxy import Exchange, ExchangeLog, Fault, Rule, RuleBook


def test_latencies_add_up_and_the_first_matching_fault_wins() -> None:
    book = RuleBook(seed=1)
    slow = book.add(Rule(Fault.LATENCY, seconds=0.2))
    slower = book.add(Rule(Fault.LATENCY, path="/pods", seconds=0.3))
    first = book.add(Rule(Fault.ERROR, method="POST"))
    second = book.add(Rule(Fault.RESET, method="POST"))
    delay, rule = book.pick("POST", "/api/v1/pods")
    assert delay == pytest.approx(0.5)
    assert rule is first
    assert (slow.fired, slower.fired, first.fired, second.fired) == (1, 1, 1, 0)


def test_method_must_match_fully_and_path_anywhere() -> None:
    book = RuleBook(seed=1)
    rule = book.add(Rule(Fault.ERROR, method="post", path="/binding$"))
    assert book.pick("POSTX", "/api/v1/namespaces/a/pods/b/binding") == (0.0, None)
    assert book.pick("POST", "/api/v1/namespaces/a/pods/b/binding?x=1") == (0.0, None)
    assert book.pick("POST", "/api/v1/namespaces/a/pods/b/binding") == (0.0, rule)


def test_count_exhausts_a_rule_and_the_next_one_takes_over() -> None:
    book = RuleBook(seed=1)
    once = book.add(Rule(Fault.THROTTLE, count=1))
    always = book.add(Rule(Fault.ERROR))
    picked = [book.pick("GET", "/x")[1] for _ in range(3)]
    assert picked == [once, always, always]
    assert (once.fired, always.fired, once.exhausted) == (1, 2, True)


def test_probability_draws_are_seeded() -> None:
    def run() -> list[bool]:
        book = RuleBook(seed=42)
        book.add(Rule(Fault.ERROR, probability=0.5))
        return [book.pick("GET", "/x")[1] is not None for _ in range(50)]

    first = run()
    assert first == run()
    assert 0 < sum(first) < 50


def test_lose_response_with_a_status_fires_only_on_that_status() -> None:
    book = RuleBook(seed=1)
    rule = book.add(Rule(Fault.LOSE_RESPONSE, when_status=201, count=1))
    _, picked = book.pick("POST", "/binding")
    assert picked is rule and rule.fired == 0  # not counted until the answer is known
    assert not book.loses(picked, 409)
    assert rule.fired == 0
    assert book.loses(picked, 201)
    assert rule.fired == 1 and rule.exhausted
    assert book.pick("POST", "/binding") == (0.0, None)


def test_lose_response_without_a_status_loses_any_answer() -> None:
    book = RuleBook(seed=1)
    rule = book.add(Rule(Fault.LOSE_RESPONSE))
    _, picked = book.pick("GET", "/x")
    assert rule.fired == 1
    assert book.loses(picked, 500)
    assert not book.loses(None, 201)
    assert not book.loses(Rule(Fault.ERROR), 201)


def test_remove_and_clear() -> None:
    book = RuleBook()
    a = book.add(Rule(Fault.ERROR, path="/a"))
    b = book.add(Rule(Fault.ERROR, path="/b"))
    book.remove(a)
    book.remove(a)  # removing twice is fine
    assert book.snapshot() == [b]
    book.clear()
    assert book.snapshot() == []


def _exchange(
    path: str,
    status: int | None,
    *,
    method: str = "POST",
    fault: Fault | None = None,
    delivered: bool = True,
    delay: float = 0.0,
    forwarded: bool = True,
) -> Exchange:
    return Exchange(0.0, method, path, status, fault, delivered, delay, forwarded)


def test_the_log_counts_bindings_by_pod() -> None:
    log = ExchangeLog()
    binding = "/api/v1/namespaces/ns/pods/{}/binding"
    log.record(_exchange(binding.format("a"), 201))
    log.record(_exchange(binding.format("a"), 409))
    log.record(_exchange(binding.format("b"), None, forwarded=False, fault=Fault.RESET))
    log.record(_exchange(binding.format("c"), None, delivered=False))  # sent, no answer
    log.record(_exchange(binding.format("d"), 201, method="GET"))
    log.record(_exchange("/api/v1/namespaces/ns/pods/e", 201))
    assert log.accepted_bindings() == {"ns/a": 1}
    assert log.forwarded_bindings() == {"ns/a": 2, "ns/c": 1}


def test_faults_applied_counts_latency_per_delayed_request() -> None:
    log = ExchangeLog()
    log.record(_exchange("/x", None, fault=Fault.ERROR, delay=0.1))
    log.record(_exchange("/x", 200, delay=0.2))
    log.record(_exchange("/x", 200))
    assert log.faults_applied() == {"error": 1, "latency": 2}
