//! The search index's words. Every record is one row of an FTS5 table
//! whose text is a set of made-up tokens, each a 60-bit hash written in 12
//! base32 letters:
//!
//! - `P(f)`: the record has a field named `f` (lowercased);
//! - `T(f, g)`: the lowercased value of field `f` contains the trigram `g`
//!   (in its first [`MAX_INDEXED_CHARS`] characters for the free-text
//!   fields, [`MAX_INDEXED_CHARS_OTHER`] for the others);
//! - `L(f)`: the value of `f` is longer than that, so only `P(f)` bounds it;
//! - `C(f)`: the value of `f` is a CID, and `E(f, v)` its lowercased
//!   value: a CID's trigrams are nearly all unique (about a sixth of a
//!   record's tokens, and the dearest to write), while what is asked of a
//!   CID field is the whole CID;
//! - `R(g)`: the lowercased RID contains the trigram `g`.
//!
//! Scoping each trigram to its field is what makes "field `tmdbid`
//! contains `140`" one short posting list instead of every record with
//! `140` anywhere. The five fields free text is searched in share one
//! scope ([`HAY`]): a word of a query is then one AND of trigrams, not an
//! OR over five fields, and a path and a file name that repeat each other
//! give their trigrams once. A token only says a record *may* match (a hash may
//! collide, trigrams may not be adjacent): the matchers decide, so the
//! index is a superset by construction and never changes an answer.
//!
//! The hash (FNV-1a) and the scheme are fixed here; [`SCHEME`] is stored
//! with the index and a store indexed under another is rebuilt.

use std::collections::BTreeSet;

use metacore::record::Fields;

use super::matchers::HAYSTACK_FIELDS;

/// Version of the token scheme (bump on any change to what is indexed).
pub(crate) const SCHEME: u32 = 4;

/// Characters of a value whose trigrams are indexed: more for the fields
/// free text is searched in (`matchers::HAYSTACK_FIELDS`), whose whole
/// value usually fits, than for the others, whose long values (a plot, a
/// description) are seldom searched for a substring and would be most of
/// the tokens.
pub(crate) const MAX_INDEXED_CHARS: usize = 256;
pub(crate) const MAX_INDEXED_CHARS_OTHER: usize = 64;

/// Trigrams of one needle put in a query at most (a superset is enough).
const MAX_QUERY_TRIGRAMS: usize = 6;

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The scope of the free-text fields' trigrams (no field name holds NUL).
const HAY: &str = "\0hay";

/// The scope of a lowercased field's trigrams and of its `L` token.
fn scope(f: &str) -> &str {
    if HAYSTACK_FIELDS.iter().any(|h| h.eq_ignore_ascii_case(f)) {
        HAY
    } else {
        f
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Presence = b'p' as isize,
    Trigram = b't' as isize,
    Long = b'l' as isize,
    Cid = b'c' as isize,
    Exact = b'e' as isize,
    Rid = b'r' as isize,
}

/// FNV-1a, fed a byte at a time.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new(kind: Kind) -> Self {
        Self(0xcbf2_9ce4_8422_2325).eat(&[kind as u8])
    }

    /// Feeds `part` and the 0 byte that ends it (no field name or value
    /// holds NUL).
    fn part(self, part: &str) -> Self {
        self.eat(part.as_bytes()).eat(&[0])
    }

    fn eat(mut self, bytes: &[u8]) -> Self {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self
    }
}

/// The hash of a token: its kind and its parts.
fn hash(kind: Kind, parts: &[&str]) -> u64 {
    parts.iter().fold(Fnv::new(kind), |h, p| h.part(p)).0
}

/// A token's text: the low 60 bits of its hash in 12 base32 letters.
fn word(h: u64) -> String {
    let mut s = String::with_capacity(12);
    push_word(&mut s, h);
    s
}

fn push_word(out: &mut String, h: u64) {
    for i in 0..12 {
        out.push(ALPHABET[((h >> (55 - 5 * i)) & 31) as usize] as char);
    }
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
    let mut all: Vec<u64> = Vec::with_capacity(fields.len() * 24 + 24);
    for (f, v) in fields {
        let f = f.to_lowercase();
        all.push(hash(Kind::Presence, &[&f]));
        let scope = scope(&f);
        if is_cid(v) {
            all.push(hash(Kind::Cid, &[scope]));
            all.push(hash(Kind::Exact, &[scope, &v.to_lowercase()]));
            continue;
        }
        let max = if scope == HAY {
            MAX_INDEXED_CHARS
        } else {
            MAX_INDEXED_CHARS_OTHER
        };
        // Only the head is lowercased (a value may be megabytes). Where
        // that differs from the whole value lowercased (a final sigma at
        // the cut), `L(f)` already makes the record a candidate.
        let head = match v.char_indices().nth(max) {
            Some((cut, _)) => {
                all.push(hash(Kind::Long, &[scope]));
                &v[..cut]
            }
            None => v.as_str(),
        }
        .to_lowercase();
        // The field's part of the hash once, each trigram after it.
        let scoped = Fnv::new(Kind::Trigram).part(scope);
        all.extend(trigrams(&head).into_iter().map(|g| scoped.part(g).0));
    }
    let rid = rid.to_lowercase();
    all.extend(trigrams(&rid).into_iter().map(|g| hash(Kind::Rid, &[g])));
    all.sort_unstable();
    all.dedup();
    let mut doc = String::with_capacity(all.len() * 13);
    for h in all {
        if !doc.is_empty() {
            doc.push(' ');
        }
        push_word(&mut doc, h);
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
/// lowercased): all of the needle's trigrams in that field, a value too
/// long to be indexed whole, or a CID value; a needle under three
/// characters only asks that the field be there.
pub(crate) fn field_contains(field: &str, needle: &str) -> String {
    // A CID value could contain any needle: its field is all the index
    // can say.
    in_field(field, needle, |f, _| hash(Kind::Cid, &[f]))
}

/// What [`field_contains`] and [`field_equals`] share: the needle's
/// trigrams in the field's scope, or a long value, or what `cid` says of
/// a CID value (a token's hash, from the scope and the lowered needle).
fn in_field(field: &str, needle: &str, cid: impl FnOnce(&str, &str) -> u64) -> String {
    let field = field.to_lowercase();
    let needle = needle.to_lowercase();
    let f = scope(&field);
    let grams: BTreeSet<&str> = trigrams(&needle).into_iter().collect();
    if grams.is_empty() {
        return has_field(&field);
    }
    format!(
        "({} OR {})",
        indexed_contains(f, grams),
        word(cid(f, &needle))
    )
}

/// A CID as the schema's classification sees one: `ba` and 14 or more
/// base32 letters, or `Qm` and 44 base58 characters.
fn is_cid(v: &str) -> bool {
    let b = v.as_bytes();
    match b {
        [b'b', b'a', rest @ ..] => {
            rest.len() >= 14 && rest.iter().all(|c| matches!(c, b'a'..=b'z' | b'2'..=b'7'))
        }
        [b'Q', b'm', rest @ ..] => {
            rest.len() == 44
                && rest
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() && !matches!(c, b'0' | b'O' | b'I' | b'l'))
        }
        _ => false,
    }
}

/// Records whose field `field` may hold a piece equal to `needle` (both
/// compared lowercased): as [`field_contains`], but a CID value only when
/// it is the needle.
pub(crate) fn field_equals(field: &str, needle: &str) -> String {
    in_field(field, needle, |f, n| hash(Kind::Exact, &[f, n]))
}

/// The part of a contains test answered by trigrams: all of them, or a
/// value too long to be indexed whole.
fn indexed_contains(f: &str, grams: BTreeSet<&str>) -> String {
    let all: Vec<String> = spread(grams.into_iter().collect())
        .into_iter()
        .map(|g| word(hash(Kind::Trigram, &[f, g])))
        .collect();
    format!(
        "({}) OR {}",
        all.join(" AND "),
        word(hash(Kind::Long, &[f]))
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
            ("plot".to_string(), "x".repeat(MAX_INDEXED_CHARS_OTHER + 1)),
        ]
        .into();
        let doc = document("01ABCDEF", &fields);
        let have = tokens_of(&doc);
        assert!(have.iter().all(|t| t.len() == 12));
        // "title" contains "river": each trigram of it, in the free-text
        // fields' scope.
        for g in trigrams("river") {
            assert!(have.contains(word(hash(Kind::Trigram, &[HAY, g])).as_str()));
        }
        // Not in another field's scope.
        assert!(!have.contains(word(hash(Kind::Trigram, &["tmdbid", "riv"])).as_str()));
        for g in trigrams("1405") {
            assert!(have.contains(word(hash(Kind::Trigram, &["tmdbid", g])).as_str()));
        }
        assert!(have.contains(has_field("TITLE").as_str()));
        assert!(have.contains(word(hash(Kind::Long, &["plot"])).as_str()));
        assert!(!have.contains(word(hash(Kind::Long, &[HAY])).as_str()));
        for g in trigrams("01abcdef") {
            assert!(have.contains(word(hash(Kind::Rid, &[g])).as_str()));
        }
    }

    #[test]
    fn a_cid_value_is_kept_whole() {
        let cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
        let fields: Fields = [("poster".to_string(), cid.to_string())].into();
        let doc = document("01ABCDEF", &fields);
        let have = tokens_of(&doc);
        assert!(have.contains(word(hash(Kind::Exact, &["poster", cid])).as_str()));
        assert!(have.contains(word(hash(Kind::Cid, &["poster"])).as_str()));
        assert!(!have.contains(word(hash(Kind::Trigram, &["poster", "baf"])).as_str()));
        assert!(field_contains("poster", "kreigh").contains(&word(hash(Kind::Cid, &["poster"]))));
        assert!(
            field_equals("Poster", &cid.to_uppercase())
                .contains(&word(hash(Kind::Exact, &["poster", cid])))
        );
        assert!(is_cid("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"));
        assert!(!is_cid("bafk-not-a-cid-at-all"));
        assert!(!is_cid("bafkshort"));
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
