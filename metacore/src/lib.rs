//! `metacore`: what every meta-core process links. Configuration from the
//! environment, the on-disk layout, the identifiers (`Rid`, `Cid`,
//! `StreamId`), the record model, the error table, the wire types of each
//! daemon's socket API and the socket server/client helpers.

/// Serializes a type as its `Display` text and deserializes it through its
/// `FromStr`, so an identifier has one spelling on the wire and a bad one
/// is refused as it is decoded.
#[macro_export]
#[doc(hidden)]
macro_rules! serde_as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod admin;
pub mod api;
pub mod backoff;
pub mod checked;
pub mod cid;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod error;
pub mod files;
pub mod key;
pub mod layout;
pub mod metrics;
pub mod record;
pub mod rid;
pub mod shutdown;
pub mod socket;
pub mod stream;
pub mod sync;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod urls;

#[cfg(test)]
mod fuzz_test;

pub use cid::Cid;
pub use config::Config;
pub use error::{ApiError, ErrorCode};
pub use record::{Fields, Target};
pub use rid::Rid;
pub use stream::{Entry, StreamId, StreamName};
