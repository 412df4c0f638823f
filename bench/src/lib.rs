//! What meta-core's benchmarks share: the record workload and its figures
//! ([`workload`]), and the daemons they start from `target/release`
//! ([`daemons`]). The benchmarks are in `benches/`; the scripts beside
//! them (`bench/*.py`, `compare.sh`) measure against peers.

pub mod daemons;
pub mod workload;
