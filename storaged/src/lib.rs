//! storaged
