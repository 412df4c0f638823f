//! The per-field value-type schema of the original service (`GET
//! /api/schema`), without I/O: what kind each stored value is, the counter
//! it adds to, and the field schema built from those counters.
//!
//! The writer keeps one counter per (field path, key hint, primitive, hint)
//! under [`classify::SCHEMA_PREFIX`], adding a value's
//! [`classify::contribution`] as it sets a value and taking the old
//! value's off as it replaces or deletes one; a read hands the counters to
//! [`aggregate::aggregate`].
//! Counting instead of rescanning keeps the schema O(kinds), not O(values);
//! the rescan that rebuilds the counters runs one at a time ([`rescans`]).

pub(crate) mod aggregate;
pub(crate) mod classify;
pub(crate) mod counts;
mod golang;
pub(crate) mod rescans;
