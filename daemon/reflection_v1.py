"""gRPC server reflection under both names clients use: `grpc.reflection.v1` (grpcurl >= 1.8.8, Postman, Evans,
@grpc/reflection) and `grpc.reflection.v1alpha` (older tools, grpcio-reflection's own client).

grpcio-reflection serves v1alpha only. The v1 protocol is the same messages under another package (the field
numbers and types are equal), so one servicer answers both: v1 calls are decoded and encoded with the v1alpha
message classes, and a copy of the v1alpha file descriptor renamed to the v1 package is added to the descriptor
pool so that a v1 client can describe the v1 service itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2

__all__ = ["V1_SERVICE", "V1ALPHA_SERVICE", "add_v1_descriptor", "v1_handler"]

_V1ALPHA = "grpc.reflection.v1alpha"
_V1 = "grpc.reflection.v1"
V1ALPHA_SERVICE = f"{_V1ALPHA}.ServerReflection"
V1_SERVICE = f"{_V1}.ServerReflection"


class _Reflection(Protocol):
    def ServerReflectionInfo(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]: ...


def _renamed(type_name: str) -> str:
    prefix = f".{_V1ALPHA}."
    return f".{_V1}." + type_name[len(prefix) :] if type_name.startswith(prefix) else type_name


def add_v1_descriptor(pool: descriptor_pool.DescriptorPool | None = None) -> None:
    """Add grpc/reflection/v1/reflection.proto (v1alpha's, renamed) to `pool` (the default one), once."""
    pool = pool or descriptor_pool.Default()
    try:
        pool.FindServiceByName(V1_SERVICE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = _V1
    proto.ClearField("options")
    for message in proto.message_type:
        for field in message.field:
            if field.type_name:
                field.type_name = _renamed(field.type_name)
    for service in proto.service:
        for method in service.method:
            method.input_type = _renamed(method.input_type)
            method.output_type = _renamed(method.output_type)
    pool.AddSerializedFile(proto.SerializeToString())


def v1_handler(servicer: _Reflection) -> grpc.GenericRpcHandler:
    """The v1 service's handler, answered by `servicer` (a v1alpha ReflectionServicer, wire-identical)."""
    info = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(V1_SERVICE, {"ServerReflectionInfo": info})
