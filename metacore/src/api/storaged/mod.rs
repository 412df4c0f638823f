//! storaged's socket API: the wire types of every route ([`wire`]) and the
//! typed client ([`StoragedClient`]). The routes are listed in
//! `docs/storaged-api.md`.

mod client;
mod watch;
mod wire;

pub use client::StoragedClient;
pub use watch::*;
pub use wire::*;
