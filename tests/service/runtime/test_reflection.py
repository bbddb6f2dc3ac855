"""Server reflection answers in both protocols, v1 and v1alpha (issue 21: a tool that
speaks only ``grpc.reflection.v1`` used to get UNIMPLEMENTED), and the contract's files it
serves carry their comments (issue 21: ``grpcurl describe`` showed none)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
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


async def file_seen_by_grpcio_client(symbol: str) -> descriptor_pb2.FileDescriptorProto:
    """What grpcio-reflection's own client (``ProtoReflectionDescriptorDatabase``, a
    blocking one, so in a thread) gets for the file defining ``symbol``."""
    srv = await grpcsrv.serve(listen="127.0.0.1:0", servicers=[], service_names=[SCHEDULER])

    def find() -> descriptor_pb2.FileDescriptorProto:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            found = ProtoReflectionDescriptorDatabase(channel).FindFileContainingSymbol(symbol)
            assert isinstance(found, descriptor_pb2.FileDescriptorProto)
            return found

    try:
        return await asyncio.to_thread(find)
    finally:
        await srv.stop(0)


def field_comments(file: descriptor_pb2.FileDescriptorProto, message: str, field: str) -> str:
    """The leading and trailing comments of ``message.field`` in ``file``'s source info."""
    [m] = [i for i, d in enumerate(file.message_type) if d.name == message]
    [f] = [i for i, d in enumerate(file.message_type[m].field) if d.name == field]
    path = [descriptor_pb2.FileDescriptorProto.MESSAGE_TYPE_FIELD_NUMBER, m]
    path += [descriptor_pb2.DescriptorProto.FIELD_FIELD_NUMBER, f]
    found = [loc for loc in file.source_code_info.location if list(loc.path) == path]
    return " ".join(loc.leading_comments + loc.trailing_comments for loc in found)


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


@pytest.mark.parametrize("service", [reflection.V1, reflection.V1ALPHA])
def test_served_files_carry_the_contracts_comments(service: str) -> None:
    [answer] = asyncio.run(ask(service, [Request(file_containing_symbol=SCHEDULER)]))
    files = {
        f.name: f
        for f in map(
            descriptor_pb2.FileDescriptorProto.FromString,
            answer.file_descriptor_response.file_descriptor_proto,
        )
    }
    scheduler, types = files["splitsched/v1/scheduler.proto"], files["splitsched/v1/types.proto"]
    assert "capped at 5000" in field_comments(scheduler, "ListPodsRequest", "page_size")
    assert "with the same filters" in field_comments(scheduler, "ListPodsRequest", "page_token")
    assert "Equal (default) | Exists" in field_comments(types, "Toleration", "operator")
    # Files not ours (google/protobuf/timestamp.proto) are served as before.
    assert "google/protobuf/timestamp.proto" in files


def test_grpcio_reflection_client_sees_a_fields_documentation() -> None:
    found = asyncio.run(file_seen_by_grpcio_client("splitsched.v1.ListPodsRequest"))
    assert found.name == "splitsched/v1/scheduler.proto"
    assert "capped at 5000" in field_comments(found, "ListPodsRequest", "page_size")
