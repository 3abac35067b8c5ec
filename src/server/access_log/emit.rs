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

/// A field of the `request completed` line as its `tracing` event records it, by how the
/// line's table writes it: `raw`, text written as it is (a `&str` to a typed consumer);
/// `text`, request text (a `&str`, which a text formatter quotes); `display` (a reference),
/// `display_val` (a value) and `path`, a `Display`; `ip`, `uint` and `float`. The kinds
/// ending in `_opt`, and `text`, `display`, `display_val`, `path` and `ip`, take an
/// `Option`: an absent field is not recorded.
macro_rules! traced {
    (raw, $value:expr) => {
        tracing::field::display(Raw($value))
    };
    (raw_opt, $value:expr) => {
        $value.map(|value| tracing::field::display(Raw(value)))
    };
    (display, $value:expr) => {
        $value.map(tracing::field::display)
    };
    (display_val, $value:expr) => {
        $value.map(tracing::field::display)
    };
    (path, $value:expr) => {
        $value.map(tracing::field::display)
    };
    (ip, $value:expr) => {
        $value.map(tracing::field::display)
    };
    // `text`, `uint`, `uint_opt`, `float`: the value itself.
    ($how:ident, $value:expr) => {
        $value
    };
}

/// The same field as the crate's JSON writer takes it from the slot (`LineFields`): nothing
/// when it is absent (`None`).
#[cfg(feature = "access-json")]
macro_rules! handed {
    ($w:ident, $key:tt, raw, $value:expr) => {
        $w.str(super::json::key!($key), $value)
    };
    ($w:ident, $key:tt, raw_opt, $value:expr) => {
        if let Some(value) = $value {
            $w.str(super::json::key!($key), value);
        }
    };
    ($w:ident, $key:tt, text, $value:expr) => {
        if let Some(value) = $value {
            $w.str(super::json::key!($key), value);
        }
    };
    ($w:ident, $key:tt, display, $value:expr) => {
        if let Some(value) = $value {
            $w.display(super::json::key!($key), value);
        }
    };
    ($w:ident, $key:tt, display_val, $value:expr) => {
        if let Some(value) = $value {
            $w.display(super::json::key!($key), &value);
        }
    };
    ($w:ident, $key:tt, path, $value:expr) => {
        if let Some(path) = $value {
            match path.as_plain() {
                Some(plain) => $w.str(super::json::key!($key), plain),
                None => $w.display(super::json::key!($key), path),
            }
        }
    };
    ($w:ident, $key:tt, ip, $value:expr) => {
        if let Some(value) = $value {
            $w.ip(super::json::key!($key), value);
        }
    };
    ($w:ident, $key:tt, uint, $value:expr) => {
        $w.u64(super::json::key!($key), $value)
    };
    ($w:ident, $key:tt, uint_opt, $value:expr) => {
        if let Some(value) = $value {
            $w.u64(super::json::key!($key), u64::from(value));
        }
    };
    ($w:ident, $key:tt, float, $value:expr) => {
        $w.f64(super::json::key!($key), $value)
    };
}

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
        // The path as every printer shows it (the table's `path` writes it plainly when it can).
        let path = uri.map(|uri| PathText {
            rule: &self.query,
            path: uri.path(),
        });
        // The line's fields, in its order, once: the usual ones; those most requests lack
        // (`rare`: an error's, a port that is not the scheme's, annotations, a gRPC call's, a
        // panic's, a caller's budget, configured headers); the request's and the trace's ids.
        // Each names how it is written (`traced!` for the event, `handed!` for the crate's
        // JSON writer). Text that cannot hold a space (a method, a scheme, a URI's path and
        // query, the crate's own words) is written as it is (`raw`: to a typed consumer, the
        // same string); header text a client sent is a `&str` (`text`), which a text
        // formatter quotes and escapes, so that it cannot pass for more fields.
        macro_rules! completed_line {
            ($then:ident $(, $arg:expr)?) => {
                $then! {
                    $($arg;)?
                    [
                        "http.request.method" => raw(method),
                        "url.scheme" => raw(scheme),
                        "url.path" => path(path.as_ref()),
                        "url.query" => display(query.as_ref()),
                        "http.route" => display_val(end.route().map(UrlText)),
                        "server.address" => text(address.as_deref()),
                        "client.address" => ip(peer.map(|peer| peer.ip())),
                        "client.port" => uint_opt(peer.map(|peer| peer.port())),
                        "network.protocol.version" => raw_opt(committed.version().map(protocol_version)),
                        "user_agent.original" => text(user_agent.as_deref()),
                        "http.request.header.referer" => display(referer.as_ref()),
                        "http.response.status_code" => uint_opt(status.map(|s| s.as_u16())),
                        "http.response.body.size" => uint_opt(status.map(|_| end.bytes_sent())),
                        "http.server.request.duration" => float(end.duration().as_secs_f64()),
                        "shared_headers.outcome" => raw(outcome.token()),
                        "shared_headers.time_to_commit_us" => uint(micros(to_commit)),
                    ]
                    [
                        "server.port" => uint_opt(port),
                        "error.type" => raw_opt(error),
                        "shared_headers.annotations" => text(annotations.as_deref()),
                        "http.request.method_original" => raw_opt(method_original),
                        "rpc.system" => raw_opt(system),
                        "rpc.service" => display_val(rpc.map(|(service, _)| service)),
                        "rpc.method" => display_val(rpc.map(|(_, method)| method)),
                        "rpc.grpc.status_code" => uint_opt(end.grpc_status()),
                        "exception.message" => text(panic_message.as_deref()),
                        "shared_headers.time_to_head_us" => uint_opt(to_head.filter(|head| *head != to_commit).map(micros)),
                        "shared_headers.budget_us" => uint_opt(budget.map(micros)),
                        "shared_headers.budget_source" => raw_opt(source),
                        "shared_headers.budget_error" => display(budget_error.as_ref()),
                        "shared_headers.request_headers" => text(request_headers.as_deref()),
                        "shared_headers.response_headers" => text(response_headers.as_deref()),
                    ]
                    [
                        "http.request.id" => text(request_id),
                        "trace_id" => text(trace_id),
                        "span_id" => text(span_id),
                    ]
                }
            };
        }
        // Three callsites: the usual line, one with the request's ids, one with the rare
        // fields too. A callsite's every field costs each line (the value set has an entry
        // per field), present or not.
        macro_rules! events {
            (
                $level:expr;
                [$($key:tt => $how:ident($value:expr),)*]
                [$($rare_key:tt => $rare_how:ident($rare_value:expr),)*]
                [$($id_key:tt => $id_how:ident($id_value:expr),)*]
            ) => {
                if rare {
                    tracing::event!(
                        target: "shared_headers::access",
                        $level,
                        $($key = traced!($how, $value),)*
                        $($rare_key = traced!($rare_how, $rare_value),)*
                        $($id_key = traced!($id_how, $id_value),)*
                        "request completed"
                    )
                } else if request_id.is_some() {
                    tracing::event!(
                        target: "shared_headers::access",
                        $level,
                        $($key = traced!($how, $value),)*
                        $($id_key = traced!($id_how, $id_value),)*
                        "request completed"
                    )
                } else {
                    tracing::event!(
                        target: "shared_headers::access",
                        $level,
                        $($key = traced!($how, $value),)*
                        "request completed"
                    )
                }
            };
        }
        // The crate's JSON writer, when one is alive, takes these fields from this thread's
        // slot rather than through the event's visitor: the same fields, in the order of the
        // callsite `events!` picks, the same values (`tests/access_json.rs` compares both).
        #[cfg(feature = "access-json")]
        macro_rules! fill {
            (
                [$($key:tt => $how:ident($value:expr),)*]
                [$($rare_key:tt => $rare_how:ident($rare_value:expr),)*]
                [$($id_key:tt => $id_how:ident($id_value:expr),)*]
            ) => {
                super::json::Armed::fill(|w| {
                    w.message("request completed");
                    $(handed!(w, $key, $how, $value);)*
                    if rare {
                        $(handed!(w, $rare_key, $rare_how, $rare_value);)*
                    }
                    if rare || request_id.is_some() {
                        $(handed!(w, $id_key, $id_how, $id_value);)*
                    }
                })
            };
        }
        #[cfg(feature = "access-json")]
        let _armed = completed_line!(fill);
        match level {
            Level::ERROR => completed_line!(events, Level::ERROR),
            Level::WARN => completed_line!(events, Level::WARN),
            Level::INFO => completed_line!(events, Level::INFO),
            Level::DEBUG => completed_line!(events, Level::DEBUG),
            _ => completed_line!(events, Level::TRACE),
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
