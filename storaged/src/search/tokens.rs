//! The search index's words. Every record is one row of an FTS5 table
//! whose text is a set of made-up tokens, each a 60-bit hash written in 12
//! base32 letters:
//!
//! - `P(f)`: the record has a field named `f` (lowercased);
//! - `T(f, g)`: the lowercased value of field `f` contains the trigram `g`
//!   (in its first [`MAX_INDEXED_CHARS`] characters);
//! - `L(f)`: the value of `f` is longer than that, so only `P(f)` bounds it;
//! - `R(g)`: the lowercased RID contains the trigram `g`.
//!
//! Scoping each trigram to its field is what makes "field `tmdbid`
//! contains `140`" one short posting list instead of every record with
//! `140` anywhere. A token only says a record *may* match (a hash may
//! collide, trigrams may not be adjacent): the matchers decide, so the
//! index is a superset by construction and never changes an answer.
//!
//! The hash (FNV-1a) and the scheme are fixed here; [`SCHEME`] is stored
//! with the index and a store indexed under another is rebuilt.

use std::collections::BTreeSet;

use metacore::record::Fields;

/// Version of the token scheme (bump on any change to what is indexed).
pub(crate) const SCHEME: u32 = 1;

/// Characters of a value whose trigrams are indexed.
pub(crate) const MAX_INDEXED_CHARS: usize = 256;

/// Trigrams of one needle put in a query at most (a superset is enough).
const MAX_QUERY_TRIGRAMS: usize = 6;

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

#[derive(Clone, Copy)]
enum Kind {
    Presence = b'p' as isize,
    Trigram = b't' as isize,
    Long = b'l' as isize,
    Rid = b'r' as isize,
}

/// FNV-1a over the kind and the parts, each part ended by a 0 byte (no
/// field name or value holds NUL).
fn hash(kind: Kind, parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(kind as u8);
    for p in parts {
        for &b in p.as_bytes() {
            eat(b);
        }
        eat(0);
    }
    h
}

/// A token's text: the low 60 bits of its hash in 12 base32 letters.
fn word(h: u64) -> String {
    (0..12)
        .map(|i| ALPHABET[((h >> (55 - 5 * i)) & 31) as usize] as char)
        .collect()
}

/// The trigrams of a lowercased string, by characters.
pub(crate) fn trigrams(s: &str) -> Vec<&str> {
    let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
    (0..starts.len().saturating_sub(2))
        .map(|i| {
            let end = starts.get(i + 3).copied().unwrap_or(s.len());
            &s[starts[i]..end]
        })
        .collect()
}

/// The row text of a record: its tokens, each once, space-separated.
pub(crate) fn document(rid: &str, fields: &Fields) -> String {
    let mut set = BTreeSet::new();
    for (f, v) in fields {
        let f = f.to_lowercase();
        set.insert(hash(Kind::Presence, &[&f]));
        // Only the head is lowercased (a value may be megabytes). Where
        // that differs from the whole value lowercased (a final sigma at
        // the cut), `L(f)` already makes the record a candidate.
        let head = match v.char_indices().nth(MAX_INDEXED_CHARS) {
            Some((cut, _)) => {
                set.insert(hash(Kind::Long, &[&f]));
                &v[..cut]
            }
            None => v.as_str(),
        }
        .to_lowercase();
        for g in trigrams(&head) {
            set.insert(hash(Kind::Trigram, &[&f, g]));
        }
    }
    let rid = rid.to_lowercase();
    for g in trigrams(&rid) {
        set.insert(hash(Kind::Rid, &[g]));
    }
    let mut doc = String::with_capacity(set.len() * 13);
    for h in set {
        if !doc.is_empty() {
            doc.push(' ');
        }
        doc.push_str(&word(h));
    }
    doc
}

/// A piece of an FTS5 query. `None` where the index cannot narrow the
/// search (every record may match).
pub(crate) type Expr = Option<String>;

/// Records that have field `field`.
pub(crate) fn has_field(field: &str) -> String {
    word(hash(Kind::Presence, &[&field.to_lowercase()]))
}

/// Records whose field `field` may contain `needle` (both compared
/// lowercased): all of the needle's trigrams in that field, or a value too
/// long to be indexed whole; a needle under three characters only asks
/// that the field be there.
pub(crate) fn field_contains(field: &str, needle: &str) -> String {
    let f = field.to_lowercase();
    let needle = needle.to_lowercase();
    let grams: BTreeSet<&str> = trigrams(&needle).into_iter().collect();
    if grams.is_empty() {
        return has_field(&f);
    }
    let all: Vec<String> = spread(grams.into_iter().collect())
        .into_iter()
        .map(|g| word(hash(Kind::Trigram, &[&f, g])))
        .collect();
    format!(
        "(({}) OR {})",
        all.join(" AND "),
        word(hash(Kind::Long, &[&f]))
    )
}

/// Records whose lowercased RID may contain `needle` (at least three
/// characters).
pub(crate) fn rid_contains(needle: &str) -> Expr {
    let grams: BTreeSet<&str> = trigrams(needle).into_iter().collect();
    if grams.is_empty() {
        return None;
    }
    let all: Vec<String> = spread(grams.into_iter().collect())
        .into_iter()
        .map(|g| word(hash(Kind::Rid, &[g])))
        .collect();
    Some(format!("({})", all.join(" AND ")))
}

/// At most [`MAX_QUERY_TRIGRAMS`] of a needle's trigrams, spread over it.
fn spread(grams: Vec<&str>) -> Vec<&str> {
    if grams.len() <= MAX_QUERY_TRIGRAMS {
        return grams;
    }
    let step = grams.len() as f64 / MAX_QUERY_TRIGRAMS as f64;
    (0..MAX_QUERY_TRIGRAMS)
        .map(|i| grams[(i as f64 * step) as usize])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens_of(doc: &str) -> BTreeSet<&str> {
        doc.split(' ').collect()
    }

    #[test]
    fn trigrams_are_by_character() {
        assert_eq!(trigrams("abcd"), ["abc", "bcd"]);
        assert_eq!(trigrams("ab"), Vec::<&str>::new());
        assert_eq!(trigrams("éàüx"), ["éàü", "àüx"]);
    }

    #[test]
    fn a_record_has_the_tokens_a_query_asks_for() {
        let fields: Fields = [
            ("Title".to_string(), "Night River".to_string()),
            ("tmdbid".to_string(), "1405".to_string()),
            ("plot".to_string(), "x".repeat(MAX_INDEXED_CHARS + 1)),
        ]
        .into();
        let doc = document("01ABCDEF", &fields);
        let have = tokens_of(&doc);
        assert!(have.iter().all(|t| t.len() == 12));
        // "title" contains "river": each trigram of it, scoped to title.
        for g in trigrams("river") {
            assert!(have.contains(word(hash(Kind::Trigram, &["title", g])).as_str()));
        }
        // Not scoped to another field.
        assert!(!have.contains(word(hash(Kind::Trigram, &["tmdbid", "riv"])).as_str()));
        assert!(have.contains(has_field("TITLE").as_str()));
        assert!(have.contains(word(hash(Kind::Long, &["plot"])).as_str()));
        assert!(!have.contains(word(hash(Kind::Long, &["title"])).as_str()));
        for g in trigrams("01abcdef") {
            assert!(have.contains(word(hash(Kind::Rid, &[g])).as_str()));
        }
    }

    #[test]
    fn queries_name_those_tokens() {
        let q = field_contains("TMDBID", "140");
        assert!(q.contains(&word(hash(Kind::Trigram, &["tmdbid", "140"]))));
        assert!(q.contains(&word(hash(Kind::Long, &["tmdbid"]))));
        assert_eq!(field_contains("tmdbid", "14"), has_field("tmdbid"));
        assert_eq!(rid_contains("ab"), None);
        let long = field_contains("title", "a very long needle of words");
        assert_eq!(long.matches(" AND ").count(), MAX_QUERY_TRIGRAMS - 1);
    }
}
