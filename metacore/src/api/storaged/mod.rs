//! storaged's socket API: the wire types of every route ([`wire`],
//! `search` for the tree, search and schema, `backup` for the online
//! backup) and the
//! typed client ([`StoragedClient`]). The routes are listed in
//! `docs/storaged-api.md`.

mod backup;
mod client;
mod search;
mod watch;
mod wire;

pub use backup::*;
pub use client::StoragedClient;
pub use search::*;
pub use watch::*;
pub use wire::*;
