//! The lines themselves: `request completed` at the end of a response, `request committed` at
//! the commit, and the post-commit activity line.

use crate::server::line::LineOf;
use http::header::{REFERER, USER_AGENT};
use tracing::Level;

use super::AccessLog;

use super::format::{
    ALL, HeaderList, Raw, budget_of, micros, otel_method, protocol_version, rpc_parts, text,
};
use crate::exchange::{CommitEvent, Committed, LateWrites};
use crate::redact::QueryRule;
use crate::redact::url::{PathText, QueryShown, Referer, UrlText};
use crate::server::end::{EndConsumer, Ending, ResponseEnd};

#[cfg(doc)]
use crate::server::SharedHeadersLayer;

// The access line registers itself as a consumer of the end report (it names no consumer).
impl EndConsumer for AccessLog {
    /// When a subscriber may take its least severe level.
    fn interested(&self) -> bool {
        AccessLog::interested(self)
    }

    fn wants_sent_headers(&self) -> bool {
        self.logs_response_headers()
    }

    fn wants_span(&self) -> bool {
        true
    }

    fn wants_late_writes(&self) -> bool {
        true
    }

    fn end(&self, end: &ResponseEnd) {
        AccessLog::end(self, end);
    }
}

impl AccessLog {
    /// Emits the `request completed` line for `end`, the end of a response (see the
    /// [module docs](super)). The layer calls it when the access log is installed.
    pub(crate) fn end(&self, end: &ResponseEnd) {
        let committed = end.committed();
        let outcome = committed.outcome();
        let status = end.status_sent();
        let level = self.level_of(outcome, status, end.ending());
        if !(tracing::level_filters::STATIC_MAX_LEVEL >= level
            && tracing::level_filters::LevelFilter::current() >= level)
        {
            return;
        }
        let request = committed.request();
        let uri = committed.uri();
        let (method, method_original) = otel_method(committed.method());
        let scheme = end.url_scheme();
        // The record's facts as every printer shows them (the server span's too): the
        // query unless this log omits it, the server's address and port.
        let query = match &self.query {
            QueryRule::Shown { .. } => end.url_query(),
            QueryRule::Omitted { .. } => None,
        };
        let (address, port) = match end.server_address() {
            Some((host, port)) => (Some(host), port),
            None => (None, None),
        };
        let peer = committed.peer_address();
        // Every field from the request is escaped (`text`, `UrlText`, `Referer`'s URL rule):
        // printable ASCII as it is, the rest percent-encoded.
        let user_agent = self
            .request_value(request, &USER_AGENT)
            .map(|value| text(value.as_bytes()));
        let referer = self
            .request_value(request, &REFERER)
            .and_then(|value| std::str::from_utf8(value.as_bytes()).ok())
            .map(|referer| Referer {
                rule: &self.query,
                referer,
            });
        let grpc = committed.is_grpc();
        // OpenTelemetry's `rpc.system`: `grpc`, or `connect_rpc` for a Connect call.
        let system = if grpc {
            Some("grpc")
        } else if committed.line().is_some_and(|line| line.connect.is_some()) {
            Some("connect_rpc")
        } else {
            None
        };
        // Its service and method: the parts of the path as `url.path` prints it (a
        // credential path parameter's value redacted by the one rule, request text escaped).
        let rpc = if system.is_some() {
            let rule =
                QueryRule::or_default(committed.line().and_then(|line| line.rule.as_deref()));
            uri.and_then(|uri| rpc_parts(uri.path()))
                .map(|(service, method)| {
                    (
                        PathText {
                            rule,
                            path: service,
                        },
                        PathText { rule, path: method },
                    )
                })
        } else {
            None
        };
        let error = end.error_type();
        let (budget, source) = budget_of(committed);
        let to_commit = committed.time_to_commit();
        let to_head = end.time_to_head();
        let budget_error = committed.budget_error();
        let request_headers = HeaderList::of(self, &self.request_headers, request, Some(request));
        let response_headers = match end.sent_headers() {
            Some(sent) => HeaderList::of(
                self,
                &self.response_headers,
                committed.response(),
                Some(sent),
            ),
            None => None,
        };
        // Through the same question as every header: a name the log hides is hidden here too.
        let annotations = committed
            .annotations()
            .filter(|a| !a.is_empty())
            .map(|a| HeaderList {
                log: self,
                select: &ALL,
                handle: a,
                also: Some(request),
                map: a,
            });
        // Header text a client sent is recorded as a `&str` (a text formatter quotes it): one
        // string per list, for the lines that print one.
        let annotations = annotations.map(|a| a.to_string());
        let panic_message = end.panic_message().map(|m| text(m.as_bytes()));
        // The ids once on the line: the request's span carries them (`span.rs`), and the line
        // is written inside it when a subscriber took it; else the line carries them itself.
        let ids = !end.ids_in_span;
        let request_id = committed.request_id().filter(|_| ids);
        // Without a hop, the caller's trace id: the line links to the trace all the same.
        let trace_id = committed
            .context()
            .and_then(|c| c.known_trace_id())
            .filter(|_| ids);
        let span_id = committed
            .context()
            .and_then(|c| c.span_id())
            .filter(|_| ids);
        // Three callsites: the usual line, and one with the fields most requests lack (an
        // error's, a port that is not the scheme's, annotations, a gRPC call's, a panic's, a
        // caller's budget, configured headers). A callsite's every
        // field costs each line (the value set has an entry per field), present or not.
        let rare = (trace_id.is_some() && request_id.is_none())
            || method_original.is_some()
            || port.is_some()
            || error.is_some()
            || annotations.is_some()
            || grpc
            || panic_message.is_some()
            || to_head.is_some_and(|head| head != to_commit)
            || source.is_some()
            || request_headers.is_some()
            || response_headers.is_some();
        let request_headers = request_headers.map(|l| l.to_string());
        let response_headers = response_headers.map(|l| l.to_string());
        macro_rules! emit {
            ($level:expr $(, $($rare:tt)+)?) => {
                // Text that cannot hold a space (a method, a scheme, a URI's path and query,
                // the crate's own words) is written as it is (`Raw`: to a typed consumer, the
                // same string); header text a client sent is a `&str`, which a text formatter
                // quotes and escapes, so that it cannot pass for more fields.
                tracing::event!(
                    target: "shared_headers::access",
                    $level,
                    http.request.method = tracing::field::display(Raw(method)),
                    url.scheme = tracing::field::display(Raw(scheme)),
                    url.path = end.url_path().map(tracing::field::display),
                    url.query = query.as_ref().map(tracing::field::display),
                    http.route = end.route().map(|r| tracing::field::display(UrlText(r))),
                    server.address = address.as_deref(),
                    client.address = peer.map(|peer| tracing::field::display(peer.ip())),
                    client.port = peer.map(|peer| peer.port()),
                    network.protocol.version = committed.version().map(|v| tracing::field::display(Raw(protocol_version(v)))),
                    user_agent.original = user_agent.as_deref(),
                    http.request.header.referer = referer.as_ref().map(tracing::field::display),
                    http.response.status_code = status.map(|s| s.as_u16()),
                    http.response.body.size = status.map(|_| end.bytes_sent()),
                    http.server.request.duration = end.duration().as_secs_f64(),
                    shared_headers.outcome = tracing::field::display(Raw(outcome.token())),
                    shared_headers.time_to_commit_us = micros(to_commit),
                    $($($rare)+)?
                    "request completed"
                )
            };
        }
        macro_rules! emit_at {
            ($level:expr) => {
                if rare {
                    emit!(
                        $level,
                        server.port = port,
                        error.type = error.map(|e| tracing::field::display(Raw(e))),
                        shared_headers.annotations = annotations.as_deref(),
                        http.request.method_original =
                            method_original.map(|m| tracing::field::display(Raw(m))),
                        rpc.system = system.map(|s| tracing::field::display(Raw(s))),
                        rpc.service = rpc.map(|(service, _)| tracing::field::display(service)),
                        rpc.method = rpc.map(|(_, method)| tracing::field::display(method)),
                        rpc.grpc.status_code = end.grpc_status(),
                        exception.message = panic_message.as_deref(),
                        shared_headers.time_to_head_us =
                            to_head.filter(|head| *head != to_commit).map(micros),
                        shared_headers.budget_us = budget.map(micros),
                        shared_headers.budget_source =
                            source.map(|s| tracing::field::display(Raw(s))),
                        shared_headers.budget_error =
                            budget_error.as_ref().map(tracing::field::display),
                        shared_headers.request_headers = request_headers.as_deref(),
                        shared_headers.response_headers = response_headers.as_deref(),
                        http.request.id = request_id,
                        trace_id = trace_id,
                        span_id = span_id,
                    )
                } else if let Some(id) = request_id {
                    // The trace's ids (`Propagation::trace_hop`), with the request's.
                    emit!($level, http.request.id = id, trace_id = trace_id, span_id = span_id,)
                } else {
                    emit!($level)
                }
            };
        }
        // The crate's JSON writer, when one is alive, takes these fields from this thread's
        // slot rather than through the event's visitor: the same fields, in the order of the
        // callsite `emit_at!` picks, the same values (`tests/access_json.rs` compares both).
        #[cfg(feature = "access-json")]
        let _armed = {
            use super::json::key;
            super::json::Armed::fill(|w| {
                w.message("request completed");
                w.str(key!("http.request.method"), method);
                w.str(key!("url.scheme"), scheme);
                let path = PathText {
                    rule: &self.query,
                    path: uri.map(|u| u.path()).unwrap_or(""),
                };
                match path.as_plain() {
                    Some(plain) => w.str(key!("url.path"), plain),
                    None => w.display(key!("url.path"), &path),
                }
                if let Some(query) = &query {
                    w.display(key!("url.query"), query);
                }
                if let Some(route) = end.route() {
                    w.display(key!("http.route"), &UrlText(route));
                }
                if let Some(address) = address.as_deref() {
                    w.str(key!("server.address"), address);
                }
                if let Some(peer) = peer {
                    w.ip(key!("client.address"), peer.ip());
                    w.u64(key!("client.port"), u64::from(peer.port()));
                }
                if let Some(version) = committed.version() {
                    w.str(key!("network.protocol.version"), protocol_version(version));
                }
                if let Some(agent) = user_agent.as_deref() {
                    w.str(key!("user_agent.original"), agent);
                }
                if let Some(referer) = &referer {
                    w.display(key!("http.request.header.referer"), referer);
                }
                if let Some(status) = status {
                    w.u64(
                        key!("http.response.status_code"),
                        u64::from(status.as_u16()),
                    );
                    w.u64(key!("http.response.body.size"), end.bytes_sent());
                }
                w.f64(
                    key!("http.server.request.duration"),
                    end.duration().as_secs_f64(),
                );
                w.str(key!("shared_headers.outcome"), outcome.token());
                w.u64(key!("shared_headers.time_to_commit_us"), micros(to_commit));
                if rare {
                    if let Some(port) = port {
                        w.u64(key!("server.port"), u64::from(port));
                    }
                    if let Some(error) = error {
                        w.str(key!("error.type"), error);
                    }
                    if let Some(annotations) = annotations.as_deref() {
                        w.str(key!("shared_headers.annotations"), annotations);
                    }
                    if let Some(original) = method_original {
                        w.str(key!("http.request.method_original"), original);
                    }
                    if let Some(system) = system {
                        w.str(key!("rpc.system"), system);
                    }
                    if let Some((service, method)) = rpc {
                        w.display(key!("rpc.service"), &service);
                        w.display(key!("rpc.method"), &method);
                    }
                    if let Some(code) = end.grpc_status() {
                        w.u64(key!("rpc.grpc.status_code"), u64::from(code));
                    }
                    if let Some(message) = panic_message.as_deref() {
                        w.str(key!("exception.message"), message);
                    }
                    if let Some(head) = to_head.filter(|head| *head != to_commit) {
                        w.u64(key!("shared_headers.time_to_head_us"), micros(head));
                    }
                    if let Some(budget) = budget {
                        w.u64(key!("shared_headers.budget_us"), micros(budget));
                    }
                    if let Some(source) = source {
                        w.str(key!("shared_headers.budget_source"), source);
                    }
                    if let Some(budget_error) = &budget_error {
                        w.display(key!("shared_headers.budget_error"), budget_error);
                    }
                    if let Some(headers) = request_headers.as_deref() {
                        w.str(key!("shared_headers.request_headers"), headers);
                    }
                    if let Some(headers) = response_headers.as_deref() {
                        w.str(key!("shared_headers.response_headers"), headers);
                    }
                }
                if rare || request_id.is_some() {
                    if let Some(id) = request_id {
                        w.str(key!("http.request.id"), id);
                    }
                    if let Some(id) = trace_id {
                        w.str(key!("trace_id"), id);
                    }
                    if let Some(id) = span_id {
                        w.str(key!("span_id"), id);
                    }
                }
            })
        };
        match level {
            Level::ERROR => emit_at!(Level::ERROR),
            Level::WARN => emit_at!(Level::WARN),
            Level::INFO => emit_at!(Level::INFO),
            Level::DEBUG => emit_at!(Level::DEBUG),
            _ => emit_at!(Level::TRACE),
        }
    }

    /// Emits a `request committed` line at the commit, for an
    /// [`on_commit`](SharedHeadersLayer::on_commit) hook of your own: the outcome, the status
    /// and headers of the head that left the layer (none yet of the body), with this log's
    /// redaction. The access log that [`SharedHeadersLayer::access_log`] installs writes its
    /// line at the end of the response instead (see the [module docs](super)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::server::{SharedHeadersLayer, access_log::AccessLog};
    /// let log = AccessLog::new();
    /// let layer = SharedHeadersLayer::new().on_commit(move |c| log.commit(c));
    /// # drop(layer);
    /// ```
    pub fn commit(&self, event: &CommitEvent<'_>) {
        let committed: &Committed = event.committed();
        let outcome = committed.outcome();
        let sent = event.sent();
        let status = sent.map(|head| head.status);
        let level = self.level_of(outcome, status, Ending::Completed);
        if !(tracing::level_filters::STATIC_MAX_LEVEL >= level
            && tracing::level_filters::LevelFilter::current() >= level)
        {
            return;
        }
        let uri = committed.uri();
        let (method, method_original) = otel_method(committed.method());
        let query = match (&self.query, uri.and_then(|uri| uri.query())) {
            (QueryRule::Shown { .. }, Some(query)) => Some(QueryShown {
                rule: &self.query,
                query,
            }),
            _ => None,
        };
        let request = committed.request();
        let user_agent = self
            .request_value(request, &USER_AGENT)
            .map(|value| text(value.as_bytes()));
        let grpc_status = sent.and_then(|head| crate::server::body::grpc_status(&head.headers));
        let request_headers = HeaderList::of(self, &self.request_headers, request, Some(request));
        let response_headers = HeaderList::of(
            self,
            &self.response_headers,
            committed.response(),
            sent.map(|head| &head.headers),
        );
        let request_headers = request_headers.map(|l| l.to_string());
        let response_headers = response_headers.map(|l| l.to_string());
        macro_rules! emit {
            ($level:expr) => {
                tracing::event!(
                    target: "shared_headers::access",
                    $level,
                    http.request.method = %method,
                    http.request.method_original = method_original.map(tracing::field::display),
                    url.path = tracing::field::display(PathText { rule: &self.query, path: uri.map(|u| u.path()).unwrap_or("") }),
                    url.query = query.as_ref().map(tracing::field::display),
                    http.response.status_code = status.map(|s| s.as_u16()),
                    rpc.grpc.status_code = grpc_status,
                    user_agent.original = user_agent.as_deref(),
                    shared_headers.outcome = %outcome.token(),
                    shared_headers.time_to_commit_us = micros(committed.time_to_commit()),
                    http.request.id = committed.request_id(),
                    shared_headers.request_headers = request_headers.as_deref(),
                    shared_headers.response_headers = response_headers.as_deref(),
                    "request committed"
                )
            };
        }
        match level {
            Level::ERROR => emit!(Level::ERROR),
            Level::WARN => emit!(Level::WARN),
            Level::INFO => emit!(Level::INFO),
            Level::DEBUG => emit!(Level::DEBUG),
            _ => emit!(Level::TRACE),
        }
    }

    /// Emits the `writes refused after the commit` event for `late` (see the
    /// [module docs](super)). The access log installs it as a late-writes hook.
    pub(crate) fn late_writes(&self, late: &LateWrites) {
        let committed = late.committed();
        tracing::event!(
            target: "shared_headers::access",
            Level::WARN,
            http.request.method = %otel_method(committed.method()).0,
            url.path = tracing::field::display(PathText { rule: &self.query, path: committed.uri().map(|u| u.path()).unwrap_or("") }),
            shared_headers.outcome = %committed.outcome().token(),
            http.request.id = committed.request_id(),
            shared_headers.refused_writes = late.refused_writes(),
            shared_headers.since_commit_us = micros(late.since_commit()),
            "writes refused after the commit"
        );
    }
}
