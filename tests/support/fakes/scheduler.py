"""A fake Scheduler for the binder's tests: a gRPC server that serves only
``Scheduler.ReportBindingOutcome`` and keeps the outcomes it is sent."""

from __future__ import annotations

from typing import Any

import grpc

from splitsched.v1 import scheduler_pb2

Outcome = scheduler_pb2.BindingOutcome


class FakeScheduler:
    """Collects reported outcomes (serves only ``Scheduler.ReportBindingOutcome``)."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.requests = 0

    async def ReportBindingOutcome(
        self, request: scheduler_pb2.ReportBindingOutcomeRequest, context: Any
    ) -> scheduler_pb2.ReportBindingOutcomeResponse:
        self.requests += 1
        self.outcomes.extend(request.outcomes)
        return scheduler_pb2.ReportBindingOutcomeResponse(accepted=len(request.outcomes))

    def for_decision(self, decision_id: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.decision_id == decision_id]


async def start_scheduler(fake: FakeScheduler, *, port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(
        fake.ReportBindingOutcome,
        request_deserializer=scheduler_pb2.ReportBindingOutcomeRequest.FromString,
        response_serializer=scheduler_pb2.ReportBindingOutcomeResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "splitsched.v1.Scheduler", {"ReportBindingOutcome": handler}
            ),
        )
    )
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound
