//! Server middleware (to be written).
