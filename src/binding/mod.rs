//! napi surface (in progress)
