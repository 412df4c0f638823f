//! The wire types of each daemon's socket API, one module a daemon, with a
//! typed client each. Daemons define no wire types of their own.

pub mod apid;
pub mod daemon;
pub mod mountd;
pub mod storaged;
pub mod supervisor;
pub mod watcherd;
