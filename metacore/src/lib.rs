//! `metacore`: what every meta-core process links. Configuration from the
//! environment, the on-disk layout, the identifiers (`Rid`, `Cid`,
//! `StreamId`), the record model, the error table, the wire types of each
//! daemon's socket API and the socket server/client helpers.

pub mod api;
pub mod checked;
pub mod cid;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod error;
pub mod key;
pub mod layout;
pub mod record;
pub mod rid;
pub mod shutdown;
pub mod socket;
pub mod stream;
pub mod telemetry;
pub mod urls;

pub use cid::Cid;
pub use config::Config;
pub use error::{ApiError, ErrorCode};
pub use record::{Fields, Target};
pub use rid::Rid;
pub use stream::{Entry, StreamId, StreamName};
