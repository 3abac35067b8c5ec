//! OpenTelemetry's SDK with its in-memory exporter (tests/conformance.rs): a meter provider
//! whose `http.server.request.duration` points and `http.server.active_requests` values are
//! read back from memory, as tests/layer_metrics.rs does.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, MeterProvider};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// One histogram data point: its attributes (as strings), its count, its sum.
pub type Point = (BTreeMap<String, String>, u64, f64);

/// What was read: the histogram's points and the counter's (attributes, value).
#[derive(Debug, Default)]
pub struct Read {
    pub points: Vec<Point>,
    pub active: Vec<(BTreeMap<String, String>, i64)>,
}

impl Read {
    /// The requests the histogram counted.
    pub fn count(&self) -> u64 {
        self.points.iter().map(|point| point.1).sum()
    }
}

/// A meter provider whose metrics are read back from memory.
pub struct Metrics {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

impl Metrics {
    pub fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        Metrics { provider, exporter }
    }

    pub fn meter(&self) -> Meter {
        self.provider.meter("conformance")
    }

    /// The latest cumulative points of the duration histogram and of the active counter.
    pub fn read(&self) -> Read {
        self.exporter.reset();
        let _ = self.provider.force_flush();
        let exported: Vec<ResourceMetrics> =
            self.exporter.get_finished_metrics().unwrap_or_default();
        let mut read = Read::default();
        let attrs = |it: &mut dyn Iterator<Item = &KeyValue>| {
            it.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let Some(last) = exported.last() else {
            return read;
        };
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                match (metric.name(), metric.data()) {
                    (
                        "http.server.request.duration",
                        AggregatedMetrics::F64(MetricData::Histogram(h)),
                    ) => {
                        for point in h.data_points() {
                            read.points.push((
                                attrs(&mut point.attributes()),
                                point.count(),
                                point.sum(),
                            ));
                        }
                    }
                    ("http.server.active_requests", AggregatedMetrics::I64(MetricData::Sum(s))) => {
                        for point in s.data_points() {
                            read.active
                                .push((attrs(&mut point.attributes()), point.value()));
                        }
                    }
                    _ => {}
                }
            }
        }
        read
    }

    /// Waits (at most `limit`) until the histogram counted `n` requests, then reads.
    pub async fn wait(&self, n: u64, limit: Duration) -> Read {
        let start = Instant::now();
        loop {
            let read = self.read();
            if read.count() >= n || start.elapsed() > limit {
                return read;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The points the histogram `name` counted (any attributes), and their error types.
    pub fn histogram(&self, name: &str) -> Vec<Point> {
        self.exporter.reset();
        let _ = self.provider.force_flush();
        let exported = self.exporter.get_finished_metrics().unwrap_or_default();
        let mut points = Vec::new();
        let Some(last) = exported.last() else {
            return points;
        };
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                if let (true, AggregatedMetrics::F64(MetricData::Histogram(h))) =
                    (metric.name() == name, metric.data())
                {
                    for point in h.data_points() {
                        let attrs = point
                            .attributes()
                            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                            .collect();
                        points.push((attrs, point.count(), point.sum()));
                    }
                }
            }
        }
        points
    }

    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}
