//! `Cid`, `Rid`, `StreamId` and `Target`, as a request or a stored key
//! spells them.

use proptest::prelude::*;

use super::mutation;
use crate::cid::{B32, Cid, base32_lower_encode};
use crate::record::Target;
use crate::rid::{RID_LEN, Rid};
use crate::stream::StreamId;
use crate::testing::cases;

/// The codes a CID's header can hold: a varint of at most 9 bytes.
fn code() -> impl Strategy<Value = u64> {
    prop_oneof![0..0x2000u64, 0..(1u64 << 63)]
}

/// A well-formed CID of any codec, multihash code and digest.
fn valid_cid() -> impl Strategy<Value = Cid> {
    (code(), code(), prop::collection::vec(any::<u8>(), 0..80))
        .prop_map(|(codec, mh, digest)| Cid::from_digest(codec, mh, &digest))
}

/// A varint of `v`, with `pad` bytes more than it needs (`0x80`s then a
/// final `0x00`) when `pad` is not 0.
fn varint(out: &mut Vec<u8>, mut v: u64, pad: u8) {
    let mut bytes = Vec::new();
    while v >= 0x80 {
        bytes.push((v as u8) | 0x80);
        v >>= 7;
    }
    bytes.push(v as u8);
    for _ in 0..pad {
        *bytes.last_mut().expect("one byte at least") |= 0x80;
        bytes.push(0);
    }
    out.extend(bytes);
}

/// `b` and the base32 of `bytes`, the last letter's unused bits set to
/// `trailing` (masked to as many as there are).
fn spelled(bytes: &[u8], trailing: u8) -> String {
    let mut text = base32_lower_encode(bytes).into_bytes();
    let unused = (5 - bytes.len() * 8 % 5) % 5;
    if let Some(last) = text.last_mut() {
        let value = B32
            .iter()
            .position(|c| *c == *last)
            .expect("a base32 letter");
        *last = B32[value | (usize::from(trailing) & ((1 << unused) - 1))];
    }
    format!("b{}", String::from_utf8(text).expect("ASCII"))
}

/// A CID spelled byte by byte: its version, codes and length, each
/// sometimes padded, the length sometimes wrong, the last letter's unused
/// bits sometimes set. Mostly one fault at most, so the accept path runs.
fn spelled_cid() -> impl Strategy<Value = String> {
    (
        prop_oneof![4 => Just(1u64), 1 => 0..4u64],
        code(),
        code(),
        prop::collection::vec(any::<u8>(), 0..48),
        prop_oneof![4 => Just(0i64), 1 => -2..3i64],
        prop::collection::vec(prop_oneof![6 => Just(0u8), 1 => 1..3u8], 4),
        prop_oneof![2 => Just(0u8), 1 => any::<u8>()],
    )
        .prop_map(|(version, codec, mh, digest, off, pad, trailing)| {
            let mut bytes = Vec::new();
            varint(&mut bytes, version, pad[0]);
            varint(&mut bytes, codec, pad[1]);
            varint(&mut bytes, mh, pad[2]);
            let declared = (digest.len() as i64 + off).max(0) as u64;
            varint(&mut bytes, declared, pad[3]);
            bytes.extend(&digest);
            spelled(&bytes, trailing)
        })
}

/// Text that is nearly a CID: `b` and base32 letters.
fn cid_like() -> impl Strategy<Value = String> {
    "b[a-z2-7]{0,90}"
}

/// What an accepted CID must hold: it parses back to itself, and it is
/// the one spelling of its header and digest (as [`Cid::from_digest`]
/// writes it), so one CID is never two keys.
fn holds_for_accepted_cid(c: &Cid) -> Result<(), TestCaseError> {
    prop_assert_eq!(&Cid::parse(c.as_str()), &Ok(c.clone()));
    let again = Cid::from_digest(c.codec(), c.mh_code(), &c.digest());
    prop_assert_eq!(again.as_str(), c.as_str(), "one spelling");
    let json = serde_json::to_string(c).expect("a CID serializes");
    prop_assert_eq!(
        &serde_json::from_str::<Cid>(&json).expect("and reads back"),
        c
    );
    let _ = c.rank();
    Ok(())
}

fn valid_rid_text() -> impl Strategy<Value = String> {
    any::<u128>().prop_map(|v| Rid::from_u128(v).to_string())
}

/// IDs within what the 13 + 10 digit key form holds.
fn stream_id() -> impl Strategy<Value = StreamId> {
    (0..=9_999_999_999_999u64, 0..=9_999_999_999u64).prop_map(|(ms, seq)| StreamId::new(ms, seq))
}

fn holds_for_accepted_stream_id(id: StreamId) -> Result<(), TestCaseError> {
    prop_assert_eq!(StreamId::parse(&id.to_string()), Ok(id));
    prop_assert_eq!(StreamId::parse(&id.key_suffix()), Ok(id));
    prop_assert_eq!(id.key_suffix().len(), 24);
    Ok(())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_text_is_a_cid_or_a_clear_refusal(s in any::<String>()) {
        if let Ok(c) = Cid::parse(&s) {
            holds_for_accepted_cid(&c)?;
        }
    }

    #[test]
    fn base32_text_is_a_cid_or_a_clear_refusal(s in cid_like()) {
        if let Ok(c) = Cid::parse(&s) {
            holds_for_accepted_cid(&c)?;
        }
    }

    #[test]
    fn a_cid_spelled_byte_by_byte_is_accepted_only_in_its_one_spelling(s in spelled_cid()) {
        if let Ok(c) = Cid::parse(&s) {
            holds_for_accepted_cid(&c)?;
        }
    }

    #[test]
    fn every_cid_made_from_a_digest_parses_back(c in valid_cid()) {
        holds_for_accepted_cid(&c)?;
        let parsed = Cid::parse(c.as_str()).expect("parses");
        prop_assert_eq!((parsed.codec(), parsed.mh_code()), (c.codec(), c.mh_code()));
    }

    #[test]
    fn a_cid_with_one_mutation_is_a_cid_or_a_clear_refusal(c in valid_cid(), m in mutation()) {
        if let Ok(c) = Cid::parse(&m.apply(c.as_str())) {
            holds_for_accepted_cid(&c)?;
        }
    }

    #[test]
    fn any_text_is_a_rid_or_a_clear_refusal(s in any::<String>()) {
        if let Ok(r) = Rid::parse(&s) {
            prop_assert_eq!(r.to_string(), s, "one spelling");
        }
    }

    #[test]
    fn every_128_bit_value_round_trips_through_its_text(v in any::<u128>()) {
        let text = Rid::from_u128(v).to_string();
        prop_assert_eq!(text.len(), RID_LEN);
        prop_assert_eq!(Rid::parse(&text).map(Rid::as_u128), Ok(v));
    }

    #[test]
    fn rid_text_sorts_as_its_value(a in any::<u128>(), b in any::<u128>()) {
        let (ta, tb) = (Rid::from_u128(a).to_string(), Rid::from_u128(b).to_string());
        prop_assert_eq!(ta.cmp(&tb), a.cmp(&b));
    }

    #[test]
    fn a_rid_with_one_mutation_is_a_rid_or_a_clear_refusal(s in valid_rid_text(), m in mutation()) {
        let s = m.apply(&s);
        if let Ok(r) = Rid::parse(&s) {
            prop_assert_eq!(r.to_string(), s, "one spelling");
        }
    }

    #[test]
    fn any_text_is_a_stream_id_or_a_clear_refusal(s in any::<String>()) {
        if let Ok(id) = StreamId::parse(&s) {
            holds_for_accepted_stream_id(id)?;
        }
    }

    #[test]
    fn digit_text_is_a_stream_id_or_a_clear_refusal(s in "[0-9]{0,22}(-[0-9]{0,22})?") {
        if let Ok(id) = StreamId::parse(&s) {
            holds_for_accepted_stream_id(id)?;
        }
    }

    #[test]
    fn every_stream_id_round_trips_and_its_key_sorts_as_it(a in stream_id(), b in stream_id()) {
        holds_for_accepted_stream_id(a)?;
        prop_assert_eq!(a.key_suffix().cmp(&b.key_suffix()), a.cmp(&b));
        let json = serde_json::to_string(&a).expect("an ID serializes");
        prop_assert_eq!(serde_json::from_str::<StreamId>(&json).ok(), Some(a));
    }

    #[test]
    fn a_stream_id_with_one_mutation_is_an_id_or_a_clear_refusal(
        id in stream_id(),
        padded in any::<bool>(),
        m in mutation(),
    ) {
        let text = if padded { id.key_suffix() } else { id.to_string() };
        if let Ok(id) = StreamId::parse(&m.apply(&text)) {
            holds_for_accepted_stream_id(id)?;
        }
    }

    #[test]
    fn a_later_id_is_always_greater(id in stream_id(), now in any::<u64>()) {
        prop_assert!(id.next_after(now) > id);
    }

    #[test]
    fn any_hash_is_a_target_or_a_clear_refusal(s in any::<String>()) {
        if let Ok(t) = Target::parse(&s) {
            prop_assert_eq!(Target::parse(&t.to_string()).ok(), Some(t));
        }
    }

    #[test]
    fn a_mutated_rid_or_cid_is_a_target_or_a_clear_refusal(
        rid in valid_rid_text(),
        cid in valid_cid(),
        which in any::<bool>(),
        m in mutation(),
    ) {
        let s = m.apply(if which { rid.as_str() } else { cid.as_str() });
        if let Ok(t) = Target::parse(&s) {
            prop_assert_eq!(t.to_string(), s.clone(), "one spelling");
            prop_assert_eq!(Target::parse(&t.to_string()).ok(), Some(t));
        }
    }
}
