"""A server interceptor that answers undecodable requests with INVALID_ARGUMENT.

Installed on every server by `splitsched.runtime.grpcsrv.serve`. Without it, a request
whose bytes do not parse as the method's message (truncated, corrupted, a string field
that is not UTF-8) fails inside gRPC's deserializer and the client sees UNKNOWN
("Unexpected DecodeError"), the code of an uncaught exception. Here the deserializer
returns a marker instead of raising, and the handler aborts with INVALID_ARGUMENT naming
the expected message type before the servicer runs. Only unary-request methods are
wrapped (all of the contract's); client-streaming ones such as reflection keep gRPC's
default. `checked_unary` / `checked_stream` wrap a handler behind any async check, for
other interceptors too.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
#: What a server interceptor calls to get the handler it may wrap.
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]"


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


#: Runs before a handler; aborts the call to refuse it.
Check = Callable[[Any, "grpc.aio.ServicerContext[Any, Any]"], Awaitable[None]]


def checked_unary(check: Check, behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """A unary-response handler that runs `check` first (any interceptor can use it)."""

    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await check(request, context)
        result = behavior(request, context)
        return await result if inspect.isawaitable(result) else result

    return unary


def checked_stream(check: Check, behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
    """A server-streaming handler that runs `check` first; `behavior` may be an async or
    sync generator, or a coroutine that writes with context.write()."""

    async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await check(request, context)
        result = behavior(request, context)
        if inspect.isawaitable(result):
            await result
        elif hasattr(result, "__aiter__"):
            async for item in result:
                yield item
        else:
            for item in result:
                yield item

    return stream


async def _refuse_malformed(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    if isinstance(request, Malformed):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)


class MalformedRequests(grpc.aio.ServerInterceptor):
    """Turns undecodable unary requests into INVALID_ARGUMENT (see the module doc)."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        fields: dict[str, Any] = {"request_deserializer": _lenient(handler.request_deserializer)}
        if handler.unary_unary is not None:
            fields["unary_unary"] = checked_unary(_refuse_malformed, handler.unary_unary)
        if handler.unary_stream is not None:
            fields["unary_stream"] = checked_stream(_refuse_malformed, handler.unary_stream)
        replaced: Handler = handler._replace(**fields)  # type: ignore[attr-defined]
        return replaced
