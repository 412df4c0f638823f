//! The search's matchers: what a record must hold to be a result, exactly
//! as the original judged it (reference: `POST /api/metadata/search`).
//! Every plan, indexed or not, ends by asking these about each candidate,
//! so the indexes only decide which records are looked at, never which
//! are returned.

use metacore::api::storaged::SearchFilter;
use metacore::record::Fields;

/// The fields whose values make a record's free-text haystack, in order.
pub(crate) const HAYSTACK_FIELDS: [&str; 5] = [
    "title",
    "fileName",
    "originaltitle",
    "showtitle",
    "filePath",
];

/// The haystack of free-text queries: each haystack field lowercased and
/// followed by a newline (an absent field gives an empty line), so that
/// no token (tokens are split on whitespace) matches across two fields.
pub(crate) fn haystack(fields: &Fields) -> String {
    let mut hay = String::new();
    for f in HAYSTACK_FIELDS {
        if let Some(v) = fields.get(f) {
            hay.push_str(&v.to_lowercase());
        }
        hay.push('\n');
    }
    hay
}

/// The tokens of a free-text query: lowercased, split on whitespace.
pub(crate) fn tokens(query: &str) -> Vec<String> {
    query
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Whether a record passes the free-text query: an empty query passes;
/// otherwise every token is in the haystack, or the RID contains the whole
/// (lowercased) query.
pub(crate) fn matches_query(rid: &str, hay: &str, query: &str) -> bool {
    if query.is_empty() {
        return true;
    }
    tokens(query).iter().all(|t| hay.contains(t.as_str()))
        || rid.to_lowercase().contains(&query.to_lowercase())
}

/// A value that counts as set in a key-set: not empty, `false` or `0`
/// once trimmed and lowercased.
pub(crate) fn truthy(v: &str) -> bool {
    !matches!(v.trim().to_lowercase().as_str(), "" | "false" | "0")
}

/// The values of a filter that take part: trimmed, empty ones dropped.
pub(crate) fn usable_values(filter: &SearchFilter) -> Vec<&str> {
    filter
        .values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .collect()
}

/// One filter against a record's fields, the original's three arms in
/// order; any value of the filter may match (OR within a filter).
///
/// 1. Key-set, exact key: `<property>/<value>` is there and truthy.
/// 2. Key-set, any case: a field whose name, lowercased, is
///    `<property>/` lowercased followed by a value (compared without
///    case), and truthy. The key-set arms ignore `exact`.
/// 3. Flat: the field `<property>` itself, split on `,` with each piece
///    trimmed; a piece equal to a value without regard to case (`exact`),
///    or containing it without regard to case. An absent field fails.
pub(crate) fn matches_filter(fields: &Fields, filter: &SearchFilter) -> bool {
    let values = usable_values(filter);
    if filter.property.is_empty() || values.is_empty() {
        return true;
    }
    let p = &filter.property;
    if values.iter().any(|v| {
        fields
            .get(&format!("{p}/{v}"))
            .is_some_and(|val| truthy(val))
    }) {
        return true;
    }
    let stem = format!("{}/", p.to_lowercase());
    let lowered: Vec<String> = values.iter().map(|v| v.to_lowercase()).collect();
    if fields.iter().any(|(k, val)| {
        let k = k.to_lowercase();
        k.strip_prefix(stem.as_str())
            .is_some_and(|rest| lowered.iter().any(|v| *v == rest))
            && truthy(val)
    }) {
        return true;
    }
    let Some(flat) = fields.get(p.as_str()) else {
        return false;
    };
    flat.split(',').map(str::trim).any(|piece| {
        let piece = piece.to_lowercase();
        lowered.iter().any(|v| {
            if filter.exact {
                piece == *v
            } else {
                piece.contains(v.as_str())
            }
        })
    })
}

/// Whether a record is a result: the query, and every filter (AND).
pub(crate) fn matches(rid: &str, fields: &Fields, query: &str, filters: &[SearchFilter]) -> bool {
    filters.iter().all(|f| matches_filter(fields, f))
        && (query.is_empty() || matches_query(rid, &haystack(fields), query))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn filter(property: &str, values: &[&str], exact: bool) -> SearchFilter {
        SearchFilter {
            property: property.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
            exact,
        }
    }

    #[test]
    fn exact_compares_whole_pieces_and_contains_substrings() {
        let r = rec(&[("tmdbid", "1405")]);
        assert!(matches_filter(&r, &filter("tmdbid", &["140"], false)));
        assert!(!matches_filter(&r, &filter("tmdbid", &["140"], true)));
        assert!(matches_filter(&r, &filter("tmdbid", &["1405"], true)));
        assert!(!matches_filter(&r, &filter("tmdbid", &["14050"], false)));
    }

    #[test]
    fn csv_pieces_are_trimmed_members() {
        let r = rec(&[("genres", "Drama, Science Fiction ,Thriller")]);
        assert!(matches_filter(
            &r,
            &filter("genres", &["science fiction"], true)
        ));
        assert!(matches_filter(&r, &filter("genres", &["thriller"], true)));
        assert!(!matches_filter(
            &r,
            &filter("genres", &["drama, science"], true)
        ));
        assert!(matches_filter(&r, &filter("genres", &["fict"], false)));
    }

    #[test]
    fn key_sets_need_a_truthy_member_whatever_exact_says() {
        let r = rec(&[
            ("genres/Action", "true"),
            ("genres/comedy", " FALSE "),
            ("genres/drama", "0"),
            ("genres/horror", ""),
            ("genres/war", "yes"),
        ]);
        for exact in [true, false] {
            assert!(matches_filter(&r, &filter("genres", &["Action"], exact)));
            // Another case finds the member by the sweep.
            assert!(matches_filter(&r, &filter("genres", &["action"], exact)));
            assert!(matches_filter(&r, &filter("GENRES", &["ACTION"], exact)));
            assert!(matches_filter(&r, &filter("genres", &["war"], exact)));
            for off in ["comedy", "drama", "horror"] {
                assert!(
                    !matches_filter(&r, &filter("genres", &[off], exact)),
                    "{off}"
                );
            }
            // The key-set arm is exact: no substring of a member.
            assert!(!matches_filter(&r, &filter("genres", &["act"], exact)));
        }
    }

    #[test]
    fn comparisons_ignore_case() {
        let r = rec(&[("title", "The Night RIVER")]);
        assert!(matches_filter(
            &r,
            &filter("title", &["night river"], false)
        ));
        assert!(matches_filter(
            &r,
            &filter("title", &["THE NIGHT river"], true)
        ));
    }

    #[test]
    fn or_within_a_filter_and_across_filters() {
        let r = rec(&[("year", "1999"), ("type", "movie")]);
        assert!(matches_filter(&r, &filter("year", &["2001", "1999"], true)));
        assert!(!matches_filter(
            &r,
            &filter("year", &["2001", "2002"], true)
        ));
        let both = [
            filter("year", &["1999"], true),
            filter("type", &["movie"], true),
        ];
        assert!(matches("R", &r, "", &both));
        let one_off = [
            filter("year", &["1999"], true),
            filter("type", &["show"], true),
        ];
        assert!(!matches("R", &r, "", &one_off));
    }

    #[test]
    fn an_absent_field_fails_closed_and_blank_filters_pass() {
        let r = rec(&[("title", "x")]);
        assert!(!matches_filter(&r, &filter("year", &["1999"], false)));
        assert!(matches_filter(&r, &filter("", &["1999"], false)));
        assert!(matches_filter(&r, &filter("year", &[], false)));
        assert!(matches_filter(&r, &filter("year", &["  ", ""], false)));
        // A value is trimmed before it is compared.
        assert!(matches_filter(&r, &filter("title", &["  x "], true)));
    }

    #[test]
    fn a_flat_false_still_matches_false() {
        let r = rec(&[("watched", "false")]);
        assert!(matches_filter(&r, &filter("watched", &["false"], true)));
    }

    #[test]
    fn the_query_is_tokens_in_the_haystack_or_part_of_the_rid() {
        let r = rec(&[
            ("title", "Night River"),
            ("filePath", "/files/watch/Night.River.2019.mkv"),
            ("plot", "a plot word"),
        ]);
        let hay = haystack(&r);
        assert!(matches_query("01ABC", &hay, "river night"));
        assert!(matches_query("01ABC", &hay, "  RIVER   2019 "));
        assert!(
            !matches_query("01ABC", &hay, "river plot"),
            "plot is not in the haystack"
        );
        // No token spans two fields.
        assert!(!matches_query("01ABC", &hay, "river/files"));
        assert!(matches_query("01ABCDEF", &hay, "bcd"));
        assert!(!matches_query("01ABCDEF", &hay, "bcd river x"));
        assert!(matches_query("01ABC", &hay, ""));
    }
}
