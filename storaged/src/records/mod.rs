//! Records: a root's flat fields `file:<rid>/<field>`, its place in the root
//! index `idx:roots/<rid>`, its CID aliases and duplicate paths. The write
//! side runs in the writer's transaction on checked inputs ([`write`]); the
//! read side takes a reader connection ([`read`]).

mod read;
mod write;

pub use read::*;
pub(crate) use write::*;
