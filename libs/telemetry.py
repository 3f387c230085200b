"""OpenTelemetry set-up done once at each entry point.

``none`` installs providers without exporters (spans still carry ids for
log correlation and context propagation); ``console`` prints spans and
metrics; ``otlp`` ships them to OTEL_EXPORTER_OTLP_ENDPOINT.

A trace crosses processes in gRPC metadata (the interceptors below) and in
Kafka headers (libs/bus), and crosses time in the database: work done later
by another task (a step run by a worker) stores the W3C ``traceparent`` it
continues (``w3c_context`` / ``stored_context``). docs/telemetry.md lists
the spans and metrics.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TextIO

import grpc
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)
_configured = False
# W3C only, whatever OTEL_PROPAGATORS says: stored values must read back the same.
_W3C = TraceContextTextMapPropagator()


def setup_telemetry(service_name: str, exporter: str, console_file: Path | None = None) -> None:
    """Install global tracer and meter providers (first call wins).

    ``console_file`` sends the console exporter's output to a file instead of
    stdout (the dev stack keeps its terminal for humans).
    """
    global _configured
    if _configured:
        return
    _configured = True
    resource = Resource.create({"service.name": service_name})
    tracer_provider = TracerProvider(resource=resource)
    readers: list[MetricReader] = []
    out: TextIO = console_file.open("a") if console_file else sys.stdout
    span_exporter = _span_exporter(exporter, out)
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        readers.append(PeriodicExportingMetricReader(_metric_exporter(exporter, out)))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def _span_exporter(kind: str, out: TextIO) -> SpanExporter | None:
    if kind == "console":
        return ConsoleSpanExporter(out=out)
    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if kind != "none":
        log.warning("unknown telemetry exporter %r; exporting nothing", kind)
    return None


def _metric_exporter(kind: str, out: TextIO) -> MetricExporter:
    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    return ConsoleMetricExporter(out=out)


def server_interceptor() -> grpc.aio.ServerInterceptor:
    """Spans for every incoming gRPC call, continuing the caller's trace."""
    return aio_server_interceptor()


def client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """Client spans for outgoing calls, and the trace context in their metadata."""
    return list(aio_client_interceptors())


def w3c_context(span: trace.Span) -> tuple[str | None, str | None]:
    """(traceparent, tracestate) naming ``span`` as the parent, for work resumed later."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent"), carrier.get("tracestate")


def stored_context(traceparent: str | None, tracestate: str | None) -> Context:
    """The context a stored ``w3c_context`` names; empty (a new trace) when there is none."""
    carrier = {"traceparent": traceparent or ""}
    if tracestate:
        carrier["tracestate"] = tracestate
    return _W3C.extract(carrier, context=Context())
