//! What the `on_commit` hook gets: [`CommitEvent`], the record of a commit and, with the server
//! layer, the response head as it left.

use std::fmt;

use super::record::Committed;

#[cfg(doc)]
use super::{CommitHooks, Exchange, Outcome};

/// A commit as the [`on_commit`](CommitHooks::on_commit) hook sees it: the [`Committed`]
/// record and, when a response left the server layer, that response's head as it left (its
/// status, version and every header: the handler's own, the merged shared ones, and what the
/// layer removed from its own answers is absent).
///
/// A hook reads the record through [`committed`](Self::committed) (`c.committed().outcome()`,
/// `c.committed().time_to_commit()`; to keep it, `c.committed().clone()`) and the head through
/// [`sent`](Self::sent). The head is borrowed for the duration of the hook only: the layer runs
/// the hook after it built the response and before the response leaves it, without copying
/// the headers.
///
/// For a commit made outside the server layer ([`Exchange::commit`] on an exchange of
/// [`Exchange::with_hooks`]) and for requests that got no response from the layer
/// ([`Outcome::Failed`], [`Outcome::Cancelled`]), [`sent`](Self::sent) is `None`: nothing
/// was sent, and a header that was committed but not sent is never shown as sent.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use shared_headers::{CommitHooks, Exchange, Outcome, SharedHeaders};
///
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let lines = log.clone();
/// let hooks = CommitHooks::new().on_commit(move |c| {
///     lines.lock().unwrap().push((c.committed().outcome(), c.sent().is_some()));
/// });
/// let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
/// exchange.commit(Outcome::Answered)?;
/// assert_eq!(*log.lock().unwrap(), [(Outcome::Answered, false)]); // no layer: nothing sent
/// # Ok::<(), shared_headers::AlreadyCommitted>(())
/// ```
///
/// Its `Debug` prints the record (as [`Committed`]'s does) and the sent head's status, version
/// and headers as [`sent_redacted`](Self::sent_redacted) does: a secret value is never printed.
#[derive(Clone, Copy)]
pub struct CommitEvent<'a> {
    pub(crate) committed: &'a Committed,
    pub(crate) sent: Option<&'a http::response::Parts>,
}

impl<'a> CommitEvent<'a> {
    /// The record of the commit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// # use shared_headers::{CommitHooks, Committed, Exchange, Outcome, SharedHeaders};
    /// let kept: Arc<Mutex<Vec<Committed>>> = Arc::default();
    /// let keep = kept.clone();
    /// let hooks = CommitHooks::new().on_commit(move |c| keep.lock().unwrap().push(c.committed().clone()));
    /// let exchange = Exchange::with_hooks(SharedHeaders::new(), SharedHeaders::new(), &hooks);
    /// let won = exchange.commit(Outcome::TimedOut)?;
    /// assert_eq!(kept.lock().unwrap()[0], won);
    /// # Ok::<(), shared_headers::AlreadyCommitted>(())
    /// ```
    #[inline]
    pub fn committed(&self) -> &'a Committed {
        self.committed
    }

    /// The head of the response as it left the server layer (status, version, headers,
    /// extensions), or `None` if no response left it.
    ///
    /// # Examples
    ///
    /// See the [type docs](Self); with the server layer:
    /// [`SharedHeadersLayer::on_commit`](crate::server::SharedHeadersLayer::on_commit).
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_commit(|c| {
    ///     if let Some(head) = c.sent() {
    ///         println!("{} with {} headers", head.status, head.headers.len());
    ///     }
    /// });
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn sent(&self) -> Option<&'a http::response::Parts> {
        self.sent
    }

    /// The response headers as they left the layer, formatted for a log with the response
    /// handle's secret names (its [`Builder`](crate::Builder)'s
    /// [`sensitive`](crate::Builder::sensitive) list) and the default rules: a secret value is
    /// never printed, whether it was written through the handle or set by the handler on its
    /// own response. `None` if no response left the layer.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::CommitHooks;
    /// let hooks = CommitHooks::new().on_commit(|c| {
    ///     if let Some(headers) = c.sent_redacted() {
    ///         println!("sent {headers}");
    ///     }
    /// });
    /// # drop(hooks);
    /// ```
    #[inline]
    pub fn sent_redacted(&self) -> Option<crate::redact::Redacted<'a>> {
        let committed = self.committed;
        self.sent
            .map(|head| committed.response().redact_with_policy(&head.headers))
    }
}

impl fmt::Debug for CommitEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// The sent head as `http::response::Parts` prints it, its headers redacted.
        struct Head<'a>(&'a http::response::Parts, crate::redact::Redacted<'a>);
        impl fmt::Debug for Head<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct("Parts")
                    .field("status", &self.0.status)
                    .field("version", &self.0.version)
                    .field("headers", &self.1)
                    .finish_non_exhaustive()
            }
        }
        let sent = self
            .sent
            .zip(self.sent_redacted())
            .map(|(head, headers)| Head(head, headers));
        f.debug_struct("CommitEvent")
            .field("committed", self.committed)
            .field("sent", &sent)
            .finish()
    }
}
