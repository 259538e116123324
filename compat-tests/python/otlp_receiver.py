"""A real OTLP/HTTP receiver for the tests: decodes each ExportTraceServiceRequest (and
ExportMetricsServiceRequest) with OpenTelemetry's own protobuf types (opentelemetry-proto,
pinned in requirements.txt) and keeps the spans (and metrics), as a collector's OTLP
receiver would get them."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


class Span:
    def __init__(self, resource: dict, s):
        self.name = s.name
        self.trace_id = s.trace_id.hex()
        self.span_id = s.span_id.hex()
        self.parent_span_id = s.parent_span_id.hex()
        self.trace_state = s.trace_state  # W3C `tracestate`, as the span carries it on
        self.kind = s.kind
        self.start_ns, self.end_ns = s.start_time_unix_nano, s.end_time_unix_nano
        self.resource = resource
        self.status_code = s.status.code  # 2 = error
        self.links = [(link.trace_id.hex(), link.span_id.hex()) for link in s.links]
        self.attributes = {}
        for kv in s.attributes:
            v = kv.value
            self.attributes[kv.key] = (v.string_value if v.HasField("string_value") else
                                       v.int_value if v.HasField("int_value") else
                                       v.double_value if v.HasField("double_value") else
                                       v.bool_value)

    def __repr__(self) -> str:
        return f"Span({self.name} trace={self.trace_id} parent={self.parent_span_id} {self.attributes})"


class OtlpReceiver:
    """Listens on 127.0.0.1 (a free port); `endpoint` is the base URL to give the broker."""

    def __init__(self):
        self.spans: list[Span] = []
        # (resource attributes, metric names) per ResourceMetrics posted to /v1/metrics.
        self.metrics: list[tuple[dict, list[str]]] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                protobuf = self.headers.get("Content-Type", "").startswith("application/x-protobuf")
                if self.path == "/v1/metrics" and protobuf:
                    req = metrics_service_pb2.ExportMetricsServiceRequest()
                    req.ParseFromString(body)
                    with receiver._lock:
                        for rm in req.resource_metrics:
                            res = {kv.key: kv.value.string_value for kv in rm.resource.attributes}
                            names = [m.name for sm in rm.scope_metrics for m in sm.metrics]
                            receiver.metrics.append((res, names))
                    out = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                ok = self.path == "/v1/traces" and protobuf
                if ok:
                    req = trace_service_pb2.ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    with receiver._lock:
                        receiver.requests += 1
                        for rs in req.resource_spans:
                            res = {kv.key: kv.value.string_value or kv.value.int_value
                                   for kv in rs.resource.attributes}
                            for ss in rs.scope_spans:
                                receiver.spans.extend(Span(res, s) for s in ss.spans)
                out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString() if ok else b""
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, pred, timeout_s: float = 30) -> list[Span]:
        """The spans once `pred(spans)` holds; fails with what arrived if it never does."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                spans = list(self.spans)
            if pred(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"spans never matched; got {spans}")
            time.sleep(0.2)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
