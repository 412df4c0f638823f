//! What the crates' property tests share (feature `testing`, enabled by
//! their dev-dependencies only; nothing shipped links it).

use proptest::test_runner::Config;

/// `n` cases by default, or `PROPTEST_CASES` when it is set (a long run):
/// proptest reads that variable into its default configuration, which a
/// fixed case count would otherwise override.
pub fn cases(n: u32) -> Config {
    let default = Config::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        default.cases
    } else {
        n
    };
    Config { cases, ..default }
}
