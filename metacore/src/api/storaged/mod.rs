//! storaged's socket API: the wire types of every route ([`wire`], and
//! `search` for the tree, search and schema) and the
//! typed client ([`StoragedClient`]). The routes are listed in
//! `docs/storaged-api.md`.

mod client;
mod search;
mod watch;
mod wire;

pub use client::StoragedClient;
pub use search::*;
pub use watch::*;
pub use wire::*;
