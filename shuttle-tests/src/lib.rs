//! Empty: the schedules are in `tests/exchange.rs`, built only under `--cfg shared_headers_shuttle`.
