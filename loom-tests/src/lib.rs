//! loom models of shared-headers live in `tests/`; run them with `RUSTFLAGS="--cfg shared_headers_loom"`.
