//! OpenTelemetry's SDK tracer with its in-memory exporter: the spans ended so far, read back.

#![allow(dead_code)]

use opentelemetry::trace::{SpanKind, Status, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracer, SdkTracerProvider, SpanData};

/// A tracer provider whose spans are exported, one by one as they end, to memory.
pub struct Spans {
    pub provider: SdkTracerProvider,
    pub exporter: InMemorySpanExporter,
}

impl Spans {
    pub fn new() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        Spans { provider, exporter }
    }

    pub fn tracer(&self, name: &'static str) -> SdkTracer {
        self.provider.tracer(name)
    }

    /// Every span ended so far.
    pub fn finished(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    /// Waits (at most 5 s) until `n` spans have ended, and returns them.
    pub async fn wait_for(&self, n: usize) -> Vec<SpanData> {
        for _ in 0..500 {
            let spans = self.finished();
            if spans.len() >= n {
                return spans;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        self.finished()
    }
}

/// The value of attribute `key`, as a string.
pub fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

pub fn is_error(span: &SpanData) -> bool {
    matches!(span.status, Status::Error { .. })
}

pub fn of_kind(spans: &[SpanData], kind: SpanKind) -> Vec<&SpanData> {
    spans.iter().filter(|s| s.span_kind == kind).collect()
}
