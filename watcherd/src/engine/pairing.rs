//! Rename pairing: a settled file new to what is known, with the content
//! of a known path that vanished, is that file moved.

use metacore::api::storaged::{FileState, Observation};
use metacore::checked::RelPath;
use metacore::cid::Cid;

use super::gone::Gone;
use crate::debounce::Seen;

/// A settled file to announce: its path, its `stat` and its midhash digest.
pub(super) type Hashed = (String, Seen, [u8; 32]);

/// The observations of settled files, in order. A file not known before
/// whose midhash is that of a gone path (the first in path order) is a
/// move from there, and that path leaves `gone`; any other is present. A
/// path that is not a valid relative path is left out.
pub(super) fn pair(
    hashed: Vec<Hashed>,
    is_known: impl Fn(&str) -> bool,
    gone: &mut Gone,
) -> Vec<Observation> {
    let mut observations = Vec::with_capacity(hashed.len());
    for (rel, seen, midhash) in hashed {
        let from = if is_known(&rel) {
            None
        } else {
            gone.matching(&midhash)
        };
        let Ok(path) = RelPath::new(rel) else {
            continue;
        };
        let file = FileState {
            size: seen.size,
            mtime_ns: seen.mtime_ns,
            midhash: Cid::midhash256(&midhash),
        };
        match from {
            Some(from) => {
                gone.remove(&from);
                match RelPath::new(from) {
                    Ok(from) => observations.push(Observation::Moved { from, path, file }),
                    Err(_) => observations.push(Observation::Present { path, file }),
                }
            }
            None => observations.push(Observation::Present { path, file }),
        }
    }
    observations
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use metacore::rid::Rid;

    use super::*;
    use crate::engine::Known;

    const A: [u8; 32] = [1; 32];
    const B: [u8; 32] = [2; 32];

    fn seen(size: u64) -> Seen {
        Seen { size, mtime_ns: 7 }
    }

    fn gone_with(paths: &[(&str, [u8; 32])]) -> Gone {
        let mut gone = Gone::default();
        for (p, midhash) in paths {
            let k = Known {
                seen: seen(1),
                midhash: *midhash,
                rid: Rid::from_u128(1),
            };
            gone.insert(p, &k, Instant::now());
        }
        gone
    }

    /// Each observation as (kind, from, path).
    fn shape(obs: &[Observation]) -> Vec<(&'static str, String, String)> {
        obs.iter()
            .map(|o| match o {
                Observation::Moved { from, path, .. } => {
                    ("moved", from.to_string(), path.to_string())
                }
                Observation::Present { path, .. } => ("present", String::new(), path.to_string()),
                Observation::Gone { path } => ("gone", String::new(), path.to_string()),
            })
            .collect()
    }

    #[test]
    fn a_new_file_with_the_content_of_a_gone_one_is_a_move() {
        let mut gone = gone_with(&[("old/a.mp3", A)]);
        let obs = pair(vec![("new/a.mp3".into(), seen(1), A)], |_| false, &mut gone);
        assert_eq!(
            shape(&obs),
            [("moved", "old/a.mp3".into(), "new/a.mp3".into())]
        );
        assert_eq!(gone.since("old/a.mp3"), None);
    }

    #[test]
    fn a_known_file_that_changed_is_present_and_leaves_the_gone_one_waiting() {
        let mut gone = gone_with(&[("old/a.mp3", A)]);
        let obs = pair(vec![("b.mp3".into(), seen(1), A)], |_| true, &mut gone);
        assert_eq!(shape(&obs), [("present", String::new(), "b.mp3".into())]);
        assert!(gone.since("old/a.mp3").is_some());
    }

    #[test]
    fn one_gone_path_pairs_with_one_new_file_only() {
        let mut gone = gone_with(&[("x/a", A), ("x/b", B)]);
        let hashed = vec![
            ("y/a1".into(), seen(1), A),
            ("y/a2".into(), seen(1), A),
            ("y/c".into(), seen(1), [3; 32]),
        ];
        let obs = pair(hashed, |_| false, &mut gone);
        assert_eq!(
            shape(&obs),
            [
                ("moved", "x/a".into(), "y/a1".into()),
                ("present", String::new(), "y/a2".into()),
                ("present", String::new(), "y/c".into()),
            ]
        );
        assert!(gone.since("x/b").is_some());
    }

    #[test]
    fn of_several_gone_paths_with_one_content_the_first_in_path_order_moves() {
        let mut gone = gone_with(&[("z/a", A), ("m/a", A)]);
        let obs = pair(vec![("n/a".into(), seen(1), A)], |_| false, &mut gone);
        assert_eq!(shape(&obs), [("moved", "m/a".into(), "n/a".into())]);
        assert!(gone.since("z/a").is_some());
    }

    #[test]
    fn a_path_that_is_not_relative_is_left_out_and_takes_no_gone_path() {
        let mut gone = gone_with(&[("x/a", A)]);
        let obs = pair(vec![("".into(), seen(1), A)], |_| false, &mut gone);
        assert!(obs.is_empty());
        assert!(gone.since("x/a").is_some());
    }
}
