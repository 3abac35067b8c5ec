//! Connection health (to be written).
