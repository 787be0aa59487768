//! The `#[napi]` functions and classes, by what they serve. Each converts its arguments and
//! calls the binding's types; none decides anything.

pub mod pool;
pub mod request;
pub mod socket;
pub mod target;
pub mod tls;
