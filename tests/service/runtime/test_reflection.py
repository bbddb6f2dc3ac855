"""Server reflection answers in both protocols, v1 and v1alpha (issue 21: a tool that
speaks only ``grpc.reflection.v1`` used to get UNIMPLEMENTED)."""

from __future__ import annotations

import asyncio

import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha.reflection_pb2 import ServerReflectionRequest as Request
from grpc_reflection.v1alpha.reflection_pb2 import ServerReflectionResponse as Response

from splitsched.runtime import grpcsrv, reflection
from splitsched.v1 import scheduler_pb2

#: Reflection reads the descriptor pool: importing the stubs is what makes the service known.
SCHEDULER = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name


async def ask(service: str, requests: list[Request]) -> list[Response]:
    """One ServerReflectionInfo stream on ``service`` (v1 and v1alpha share their wire
    format, so v1alpha's message classes encode both)."""
    srv = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[],
        service_names=[SCHEDULER],
    )
    try:
        async with grpcsrv.channel(f"127.0.0.1:{srv.port}") as channel:
            call = channel.stream_stream(
                f"/{service}/ServerReflectionInfo",
                request_serializer=Request.SerializeToString,
                response_deserializer=Response.FromString,
            )
            return [r async for r in call(iter(requests))]
    finally:
        await srv.stop(0)


@pytest.mark.parametrize("service", [reflection.V1, reflection.V1ALPHA])
def test_both_protocols_list_every_service(service: str) -> None:
    [answer] = asyncio.run(ask(service, [Request(list_services="")]))
    names = {s.name for s in answer.list_services_response.service}
    assert names == {
        "splitsched.v1.Scheduler",
        "grpc.health.v1.Health",
        reflection.V1,
        reflection.V1ALPHA,
    }


def test_v1_describes_our_services_and_itself() -> None:
    answers = asyncio.run(
        ask(
            reflection.V1,
            [
                Request(file_containing_symbol="splitsched.v1.Scheduler"),
                Request(file_containing_symbol=reflection.V1),
            ],
        )
    )
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(
            a.file_descriptor_response.file_descriptor_proto[0]
        )
        for a in answers
    ]
    assert files[0].package == "splitsched.v1"
    assert files[1].name == reflection.V1_FILE and files[1].package == "grpc.reflection.v1"
    [method] = files[1].service[0].method
    assert method.input_type == ".grpc.reflection.v1.ServerReflectionRequest"
