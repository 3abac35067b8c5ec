//! Client default headers (to be written).
