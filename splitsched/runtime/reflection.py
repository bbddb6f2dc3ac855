"""Server reflection in both of its protocols, with the contract's comments.

grpcio-reflection serves only ``grpc.reflection.v1alpha``; current tools ask
``grpc.reflection.v1`` (some ask nothing else). The two protocols' messages are the same on
the wire (v1 is v1alpha renamed), so one servicer answers both, and the v1 service's own
descriptor is registered under its name so that ``describe
grpc.reflection.v1.ServerReflection`` works too.

The descriptors the generated stubs register carry no comments, so served as they are,
``grpcurl describe`` would show none of the field documentation the contract promises.
``scripts/gen-proto.sh`` also writes the same files with their comments
(``splitsched/v1/descriptors.binpb``, checked for staleness with the stubs); every answer
that carries one of those files carries that version of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from importlib import resources
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1ALPHA = reflection.SERVICE_NAME
V1 = "grpc.reflection.v1.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
METHOD = "ServerReflectionInfo"
#: The contract's files with source info (comments), made by scripts/gen-proto.sh.
DOCUMENTED_SET = "descriptors.binpb"


def enable(server: grpc.aio.Server, service_names: Sequence[str]) -> None:
    """Reflection over ``service_names`` and the two reflection services themselves."""
    _register_v1_descriptor()
    servicer = reflection.aio.ReflectionServicer((*service_names, V1, V1ALPHA))
    documented = documented_files()

    async def info(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for response in servicer.ServerReflectionInfo(requests, context):
            yield with_comments(response, documented)

    handler = grpc.stream_stream_rpc_method_handler(
        info,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        tuple(grpc.method_handlers_generic_handler(s, {METHOD: handler}) for s in (V1, V1ALPHA))
    )


def documented_files() -> dict[str, bytes]:
    """The contract's serialized FileDescriptorProtos with their comments, by file name."""
    data = resources.files("splitsched.v1").joinpath(DOCUMENTED_SET).read_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(data).file
    return {f.name: f.SerializeToString() for f in files}


def with_comments(response: Any, documented: Mapping[str, bytes]) -> Any:
    """``response`` (a ServerReflectionResponse) with each file of ``documented`` it
    carries replaced by that documented version; other answers unchanged."""
    if response.HasField("file_descriptor_response"):
        files = response.file_descriptor_response.file_descriptor_proto
        names = [descriptor_pb2.FileDescriptorProto.FromString(f).name for f in files]
        files[:] = [documented.get(name, f) for name, f in zip(names, files, strict=True)]
    return response


def v1_file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """v1alpha's reflection.proto as v1's: the same messages under ``grpc.reflection.v1``."""
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = V1_FILE
    proto.package = "grpc.reflection.v1"
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    for message in proto.message_type:
        for f in message.field:
            if f.HasField("type_name"):
                f.type_name = f.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return proto


def _register_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(V1_FILE)
    except KeyError:
        pool.Add(v1_file_descriptor())
