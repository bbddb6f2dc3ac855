"""Server reflection in both of its protocols. grpcio-reflection serves only
``grpc.reflection.v1alpha``; current tools ask ``grpc.reflection.v1`` (some ask nothing
else). The two protocols' messages are the same on the wire (v1 is v1alpha renamed), so one
servicer answers both, and the v1 service's own descriptor is registered under its name so
that ``describe grpc.reflection.v1.ServerReflection`` works too."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2
from grpc_reflection.v1alpha import reflection_pb2_grpc as v1alpha_grpc

V1ALPHA = reflection.SERVICE_NAME
V1 = "grpc.reflection.v1.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
METHOD = "ServerReflectionInfo"


def enable(server: grpc.aio.Server, service_names: Sequence[str]) -> None:
    """Reflection over ``service_names`` and the two reflection services themselves."""
    _register_v1_descriptor()
    servicer = reflection.aio.ReflectionServicer((*service_names, V1, V1ALPHA))
    v1alpha_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(V1, {METHOD: handler}),))


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
