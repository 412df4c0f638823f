//! `Rid`: a record's root, a UUIDv7 written as 26 Crockford Base32
//! characters in the ULID layout (`01JKR8XW5T4QMV7AHNJ2DEFGHK`).
//!
//! The text form is the key form (`file:<rid>/...`), so it is strict: upper
//! case only, no `I`/`L`/`O`/`U`, first character `0`..`7` (128 bits).
//! Minted RIDs are UUIDv7, so they sort by creation time.

use std::fmt;
use std::str::FromStr;

/// The Crockford alphabet, in value order.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Length of the text form.
pub const RID_LEN: usize = 26;

/// A record root.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rid(u128);

/// Why a string is not a RID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RidError {
    #[error("a RID is 26 characters, got {0}")]
    Length(usize),
    #[error("a RID uses upper-case Crockford Base32 (0-9 A-Z without I L O U), got {0:?}")]
    Alphabet(char),
    #[error("a RID starts with 0-7 (it is 128 bits)")]
    Overflow,
}

impl Rid {
    /// A new time-ordered root (UUIDv7).
    pub fn mint() -> Self {
        Self(uuid::Uuid::now_v7().as_u128())
    }

    /// The 128-bit value.
    pub fn as_u128(self) -> u128 {
        self.0
    }

    pub fn from_u128(v: u128) -> Self {
        Self(v)
    }

    /// Parses the strict text form.
    pub fn parse(s: &str) -> Result<Self, RidError> {
        if s.len() != RID_LEN {
            return Err(RidError::Length(s.chars().count()));
        }
        for c in s.chars() {
            if !c.is_ascii() || !ALPHABET.contains(&(c as u8)) {
                return Err(RidError::Alphabet(c));
            }
        }
        if s.as_bytes()[0] > b'7' {
            return Err(RidError::Overflow);
        }
        let ulid = ulid::Ulid::from_string(s).map_err(|_| RidError::Overflow)?;
        Ok(Self(ulid.0))
    }

    /// The milliseconds since the Unix epoch in a UUIDv7's first 48 bits.
    pub fn timestamp_ms(self) -> u64 {
        (self.0 >> 80) as u64
    }
}

impl fmt::Display for Rid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; RID_LEN];
        f.write_str(ulid::Ulid(self.0).array_to_str(&mut buf))
    }
}

impl fmt::Debug for Rid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rid({self})")
    }
}

impl FromStr for Rid {
    type Err = RidError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

crate::serde_as_text!(Rid);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn minted_rids_are_26_crockford_chars_and_round_trip() {
        for _ in 0..100 {
            let r = Rid::mint();
            let s = r.to_string();
            assert_eq!(s.len(), 26);
            assert!(s.bytes().all(|b| ALPHABET.contains(&b)), "{s}");
            assert_eq!(Rid::parse(&s).unwrap(), r);
        }
    }

    #[test]
    fn a_thousand_minted_rids_are_unique_and_sorted() {
        let rids: Vec<Rid> = (0..1000).map(|_| Rid::mint()).collect();
        let set: HashSet<_> = rids.iter().collect();
        assert_eq!(set.len(), 1000);
        let texts: Vec<String> = rids.iter().map(Rid::to_string).collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(texts, sorted, "UUIDv7 text sorts in mint order");
    }

    #[test]
    fn timestamp_is_now() {
        let now = crate::clock::unix_ms();
        let ts = Rid::mint().timestamp_ms();
        assert!(ts.abs_diff(now) < 60_000, "{ts} vs {now}");
    }

    #[test]
    fn the_seed_example_parses() {
        let r = Rid::parse("01JKR8XW5T4QMV7AHNJ2DEFGHK").unwrap();
        assert_eq!(r.to_string(), "01JKR8XW5T4QMV7AHNJ2DEFGHK");
    }

    #[test]
    fn bad_rids_are_refused() {
        assert_eq!(Rid::parse(""), Err(RidError::Length(0)));
        assert_eq!(
            Rid::parse("01JKR8XW5T4QMV7AHNJ2DEFGH"),
            Err(RidError::Length(25))
        );
        assert_eq!(
            Rid::parse("01jkr8xw5t4qmv7ahnj2defghk"),
            Err(RidError::Alphabet('j'))
        );
        assert_eq!(
            Rid::parse("01JKR8XW5T4QMV7AHNJ2DEFGHI"),
            Err(RidError::Alphabet('I'))
        );
        assert_eq!(
            Rid::parse("01JKR8XW5T4QMV7AHNJ2DEFGHU"),
            Err(RidError::Alphabet('U'))
        );
        assert_eq!(
            Rid::parse("81JKR8XW5T4QMV7AHNJ2DEFGHK"),
            Err(RidError::Overflow)
        );
        assert!(Rid::parse("01JKR8XW5T4QMV7AHNJ2DEF/HK").is_err());
        assert!(Rid::parse("01JKR8XW5T4QMV7AHNJ2DEF\0HK").is_err());
        assert!(Rid::parse("01JKR8XW5T4QMV7AHNJ2DEFéK").is_err());
    }
}
