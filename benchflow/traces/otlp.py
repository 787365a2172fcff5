"""OTLP/HTTP trace requests (protobuf or JSON) decoded into plain `ReceivedSpan`s.

Protobuf bodies need `opentelemetry-proto` (the `otel` extra); JSON bodies (what the
JavaScript exporters send by default) need nothing. Both give the same spans. Ids are
lowercase hex; times are epoch nanoseconds.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from dataclasses import dataclass, field
from typing import Any


class OtlpDecodeError(ValueError):
    """The body is not an OTLP trace export request (the listener answers 400)."""


class OtlpTooLarge(ValueError):
    """The body (decompressed) is over the listener's size limit (413)."""


@dataclass
class ReceivedEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReceivedSpan:
    """One span as it arrived, whoever sent it."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[ReceivedEvent] = field(default_factory=list)
    status_code: int = 0
    """0 unset, 1 ok, 2 error (the OTLP enum)."""
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """`body` decoded from `Content-Encoding` (gzip, deflate), at most `limit` bytes.

    Raises:
        OtlpDecodeError: an unknown or broken encoding.
        OtlpTooLarge: more than `limit` bytes once decompressed.
    """
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        data = body
    elif encoding in ("gzip", "deflate"):
        wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        inflater = zlib.decompressobj(wbits)
        try:
            data = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            raise OtlpDecodeError(f"bad {encoding} body: {exc}") from None
    else:
        raise OtlpDecodeError(f"unsupported Content-Encoding {encoding!r}")
    if len(data) > limit:
        raise OtlpTooLarge(f"body over {limit} bytes")
    return data


# -- JSON ------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if not isinstance(value, dict) or not value:
        return None
    key, inner = next(iter(value.items()))
    if key == "stringValue":
        return str(inner)
    if key == "boolValue":
        return bool(inner)
    if key == "intValue":
        return int(inner)
    if key == "doubleValue":
        return float(inner)
    if key == "arrayValue":
        return [_json_value(v) for v in (inner or {}).get("values", [])]
    if key == "kvlistValue":
        return _json_attributes((inner or {}).get("values", []))
    if key == "bytesValue":
        return base64.b64decode(inner).hex()
    return None


def _json_attributes(items: Any) -> dict[str, Any]:
    return {str(kv["key"]): _json_value(kv.get("value")) for kv in items or []}


def _hex_id(value: Any, size: int) -> str | None:
    if not value:
        return None
    text = str(value).lower()
    if len(text) != size * 2:  # some senders use the protobuf JSON mapping: base64
        text = base64.b64decode(text).hex()
    int(text, 16)
    if len(text) != size * 2:
        raise ValueError(f"an id of {len(text)} hex digits")
    return text if text.strip("0") else None


def _status_code(value: Any) -> int:
    if isinstance(value, str):
        return {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(value, 0)
    return int(value or 0)


def _from_json(data: Any) -> list[ReceivedSpan]:
    spans = []
    for rs in data.get("resourceSpans") or []:
        resource = _json_attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            scope = str((ss.get("scope") or {}).get("name") or "")
            for s in ss.get("spans") or []:
                trace_id, span_id = _hex_id(s.get("traceId"), 16), _hex_id(s.get("spanId"), 8)
                if trace_id is None or span_id is None:
                    raise ValueError("a span without a trace id or span id")
                status = s.get("status") or {}
                spans.append(ReceivedSpan(
                    trace_id=trace_id, span_id=span_id,
                    parent_span_id=_hex_id(s.get("parentSpanId"), 8), name=str(s.get("name")),
                    start_ns=int(s.get("startTimeUnixNano") or 0),
                    end_ns=int(s.get("endTimeUnixNano") or 0),
                    attributes=_json_attributes(s.get("attributes")),
                    events=[ReceivedEvent(str(e.get("name")), int(e.get("timeUnixNano") or 0),
                                          _json_attributes(e.get("attributes")))
                            for e in s.get("events") or []],
                    status_code=_status_code(status.get("code")),
                    status_message=str(status.get("message") or ""), resource=resource,
                    scope=scope))
    return spans


# -- protobuf --------------------------------------------------------------------------------


def _pb_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    inner = getattr(value, which)
    if which == "array_value":
        return [_pb_value(v) for v in inner.values]
    if which == "kvlist_value":
        return _pb_attributes(inner.values)
    if which == "bytes_value":
        return bytes(inner).hex()
    return inner


def _pb_attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def _pb_id(raw: bytes, size: int) -> str | None:
    if not raw:
        return None
    if len(raw) != size:
        raise ValueError(f"an id of {len(raw)} bytes")
    text = raw.hex()
    return text if text.strip("0") else None


def _from_protobuf(body: bytes) -> list[ReceivedSpan]:
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise OtlpDecodeError("protobuf OTLP needs the otel extra (pip install "
                              "'benchflow[otel]'); or send OTLP/JSON") from None
    from google.protobuf.message import DecodeError

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpDecodeError(f"not an OTLP protobuf request: {exc}") from None
    spans = []
    for rs in request.resource_spans:
        resource = _pb_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                trace_id, span_id = _pb_id(s.trace_id, 16), _pb_id(s.span_id, 8)
                if trace_id is None or span_id is None:
                    raise ValueError("a span without a trace id or span id")
                spans.append(ReceivedSpan(
                    trace_id=trace_id, span_id=span_id,
                    parent_span_id=_pb_id(s.parent_span_id, 8), name=s.name,
                    start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    attributes=_pb_attributes(s.attributes),
                    events=[ReceivedEvent(e.name, e.time_unix_nano, _pb_attributes(e.attributes))
                            for e in s.events],
                    status_code=int(s.status.code), status_message=s.status.message,
                    resource=resource, scope=ss.scope.name))
    return spans


def decode_request(body: bytes, content_type: str | None) -> list[ReceivedSpan]:
    """The spans of one OTLP/HTTP export request.

    Raises:
        OtlpDecodeError: not JSON / protobuf, or not shaped like an export request.
    """
    kind = (content_type or "application/x-protobuf").split(";")[0].strip().lower()
    try:
        if kind == "application/json":
            data = json.loads(body)
            if not isinstance(data, dict):
                raise OtlpDecodeError("OTLP/JSON: expected an object with resourceSpans")
            return _from_json(data)
        if kind in ("application/x-protobuf", "application/protobuf"):
            return _from_protobuf(body)
    except OtlpDecodeError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise OtlpDecodeError(f"malformed OTLP request: {type(exc).__name__}: {exc}") from None
    raise OtlpDecodeError(f"unsupported Content-Type {kind!r} (application/x-protobuf or "
                          "application/json)")


def gzip_body(body: bytes) -> bytes:
    """`body` gzipped (for tests and clients of the listener)."""
    return gzip.compress(body)


__all__ = ["OtlpDecodeError", "OtlpTooLarge", "ReceivedEvent", "ReceivedSpan", "decode_request",
           "decompress", "gzip_body"]
