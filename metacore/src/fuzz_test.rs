//! Property tests of every parser of outside input in `metacore`: the
//! identifiers (`Cid`, `Rid`, `StreamId`, `Target`), RFC 3339 times, the
//! checked field names and paths, stream entries. Each is fed arbitrary
//! text and near-valid text (a valid value with one mutation), and holds:
//! no panic, and what is accepted formats to what parses back to itself.
//!
//! `cargo test -p metacore fuzz`; `PROPTEST_CASES=100000` for a long run.

mod checked;
mod clock;
mod ids;

use proptest::prelude::*;
use proptest::sample::Index;

/// A character likely to matter to one of the parsers, or any character.
pub(crate) fn spicy_char() -> impl Strategy<Value = char> {
    prop_oneof![
        any::<char>(),
        prop::sample::select(vec![
            '/',
            '.',
            '\0',
            '-',
            '+',
            ':',
            ' ',
            '|',
            'a',
            'b',
            'z',
            'A',
            'Z',
            '0',
            '2',
            '7',
            '8',
            '9',
            'I',
            'L',
            'O',
            'U',
            'T',
            'é',
            '\u{10FFFF}',
        ]),
    ]
}

/// One mutation of a text: a character replaced, removed, inserted or
/// doubled, the text cut, or an ASCII letter's case flipped.
#[derive(Debug, Clone)]
pub(crate) struct Mutation {
    at: Index,
    with: char,
    op: u8,
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    (any::<Index>(), spicy_char(), 0..6u8).prop_map(|(at, with, op)| Mutation { at, with, op })
}

impl Mutation {
    pub(crate) fn apply(&self, s: &str) -> String {
        let mut chars: Vec<char> = s.chars().collect();
        let insert_at = self.at.index(chars.len() + 1);
        if chars.is_empty() {
            return self.with.to_string();
        }
        let i = self.at.index(chars.len());
        match self.op {
            0 => chars[i] = self.with,
            1 => {
                chars.remove(i);
            }
            2 => chars.insert(insert_at, self.with),
            3 => chars.truncate(i),
            4 => chars.insert(i, chars[i]),
            _ => {
                let c = chars[i];
                chars[i] = if c.is_ascii_lowercase() {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                };
            }
        }
        chars.into_iter().collect()
    }
}
