"""A server interceptor that answers undecodable requests with INVALID_ARGUMENT.

Installed on every server by `splitsched.runtime.grpcsrv.serve`. Without it, a request
whose bytes do not parse as the method's message (truncated, corrupted, a string field
that is not UTF-8) fails inside gRPC's deserializer and the client sees UNKNOWN
("Unexpected DecodeError"), the code of an uncaught exception. Here the deserializer
returns a marker instead of raising, and the handler aborts with INVALID_ARGUMENT naming
the expected message type before the servicer runs. Only unary-request methods are
wrapped (all of the contract's); client-streaming ones such as reflection keep gRPC's
default.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


@dataclass(frozen=True)
class Malformed:
    """Stands in for a request that did not decode; `message` says why."""

    message: str


def _lenient(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    owner = getattr(deserializer, "__self__", None)
    what = getattr(getattr(owner, "DESCRIPTOR", None), "full_name", "the method's request")

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # DecodeError, or anything a custom deserializer raises
            return Malformed(f"request: not a valid {what} ({type(exc).__name__}: {exc})")

    return decode


async def _abort(context: grpc.aio.ServicerContext[Any, Any], bad: Malformed) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad.message)


def _wrap_unary(behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, Malformed):
            await _abort(context, request)
        result = behavior(request, context)
        return await result if inspect.isawaitable(result) else result

    return unary


def _wrap_stream(behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
    async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, Malformed):
            await _abort(context, request)
        result = behavior(request, context)
        if inspect.isawaitable(result):  # a handler that writes with context.write()
            await result
        elif hasattr(result, "__aiter__"):
            async for item in result:
                yield item
        else:
            for item in result:
                yield item

    return stream


class MalformedRequests(grpc.aio.ServerInterceptor):
    """Turns undecodable unary requests into INVALID_ARGUMENT (see the module doc)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        fields: dict[str, Any] = {"request_deserializer": _lenient(handler.request_deserializer)}
        if handler.unary_unary is not None:
            fields["unary_unary"] = _wrap_unary(handler.unary_unary)
        if handler.unary_stream is not None:
            fields["unary_stream"] = _wrap_stream(handler.unary_stream)
        replaced: Handler = handler._replace(**fields)  # type: ignore[attr-defined]
        return replaced
