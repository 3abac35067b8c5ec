//! Request and connection metadata that the concurrent parts of an HTTP server or client can
//! share safely: lock-free copy-on-write headers with versions and a commit-once seal.
//!
//! (Crate documentation is completed in `README.md`-aligned sections below.)

#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod error;
mod shared;
mod snapshot;
mod sync;

pub mod conn;
pub mod single_flight;

pub use error::Error;
pub use shared::{Draft, SharedHeaders};
pub use snapshot::Snapshot;

#[cfg(feature = "tower")]
pub mod layer;

#[cfg(feature = "client")]
pub mod client;
