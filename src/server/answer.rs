//! The layer's own answers (a timeout, a rejection, a caught panic): which of the committed
//! response headers they may carry.

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName};

use super::HeaderSelection;
use crate::snapshot::Snapshot;

/// The list behind [`SharedHeadersLayer::own_answer_headers`](super::SharedHeadersLayer#never-on-an-own-answer).
pub(super) static NEVER: [HeaderName; 23] = [
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::CONTENT_LOCATION,
    header::CONTENT_DISPOSITION,
    header::CONTENT_LENGTH,
    header::CONTENT_RANGE,
    header::TRANSFER_ENCODING,
    header::TRAILER,
    HeaderName::from_static("content-digest"),
    HeaderName::from_static("repr-digest"),
    HeaderName::from_static("digest"),
    HeaderName::from_static("content-md5"),
    HeaderName::from_static("connect-content-encoding"),
    HeaderName::from_static("grpc-encoding"),
    header::ETAG,
    header::LAST_MODIFIED,
    header::ACCEPT_RANGES,
    header::CACHE_CONTROL,
    header::EXPIRES,
    header::AGE,
    header::PRAGMA,
    header::VARY,
];

/// Whether an own answer carries a committed header named `name` under `selection`.
fn carries(selection: &HeaderSelection, name: &HeaderName) -> bool {
    !NEVER.contains(name) && selection.contains(name)
}

/// What the response future needs to make the layer's own answers.
#[derive(Debug, Clone)]
pub(super) struct OwnAnswers {
    pub(super) timeout_status: StatusCode,
    pub(super) rejection_status: StatusCode,
    /// Whether each response carries its `Committed` record in its extensions.
    pub(super) record: bool,
    pub(super) headers: HeaderSelection,
    /// Whether a caught panic of the inner future goes on to the caller after the commit.
    pub(super) resume_panics: bool,
}

impl OwnAnswers {
    /// Appends the committed headers that an own answer carries to `into` (an empty map),
    /// stopping quietly at `HeaderMap`'s size limit (the record still holds them all).
    pub(super) fn copy_safe_headers(&self, into: &mut HeaderMap, committed: &Snapshot) {
        for (name, value) in committed.iter() {
            if carries(&self.headers, name) && into.try_append(name, value.clone()).is_err() {
                return;
            }
        }
    }
}
