//! `Cid`: a bare CIDv1 in its one accepted spelling (multibase `b`, RFC 4648
//! base32 lower case, no padding), its codec and multihash code, and the rank
//! ladder that elects a record's canonical CID on read.
//!
//! The ladder and the tie-break are pinned by the golden vectors in
//! `shared/data/cid-rank-vectors.json` (see the tests). CIDv0, the retired
//! `algo:cid` token form and anything else are refused by [`Cid::parse`] and
//! rank 0.
//!
//! We decode by hand rather than with the `cid` crate: that crate accepts
//! every multibase (we must refuse all but one) and caps digests at 64 bytes,
//! which would refuse long identity-hash locators (URLs) that rank 5.

use std::fmt;
use std::str::FromStr;

/// Multicodec and multihash codes the ladder looks at.
pub mod code {
    pub const IDENTITY: u64 = 0x00;
    pub const SHA1: u64 = 0x11;
    pub const SHA2_256: u64 = 0x12;
    pub const SHA3_384: u64 = 0x15;
    pub const SHA3_256: u64 = 0x16;
    pub const RAW: u64 = 0x55;
    pub const DAG_PB: u64 = 0x70;
    pub const MD5: u64 = 0xd5;
    pub const CRC32: u64 = 0x0132;
    pub const MIDHASH256: u64 = 0x1000;
    pub const BTIH_V1_FILE: u64 = 0x1001;
    pub const BTIH_V2_FILE: u64 = 0x1002;
    pub const NZB_POSTING: u64 = 0x1003;
    pub const NZB_RELEASE: u64 = 0x1005;
    pub const URL: u64 = 0x1006;
    pub const CARD: u64 = 0x1007;
    pub const YT_VIDEO: u64 = 0x1008;
    pub const EXT_PLAY: u64 = 0x1009;
    pub const PROVIDER_FILE: u64 = 0x100A;
    pub const BTIH_V2: u64 = 0x10B7;
    pub const BT_PIECES_ROOT: u64 = 0xb702;
}

/// A validated CIDv1 string with its decoded header.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cid {
    text: String,
    codec: u64,
    mh_code: u64,
}

/// Why a string is not an accepted CID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidError {
    #[error("a CID is CIDv1 in base32 lower case starting with 'b'")]
    Multibase,
    #[error("a CID uses base32 lower case (a-z, 2-7), found {0:?}")]
    Alphabet(char),
    #[error("the CID's base32 has an impossible length")]
    Padding,
    #[error("the CID ends inside its header")]
    Truncated,
    #[error("only CIDv1 is accepted, this is version {0}")]
    Version(u64),
    #[error("the CID's digest is {actual} bytes, its header says {declared}")]
    DigestLength { declared: u64, actual: usize },
    /// Its last letter carries bits past the last byte: the same bytes
    /// have another, canonical spelling.
    #[error("the CID's last base32 letter has unused bits set (a CID has one spelling)")]
    TrailingBits,
    /// A varint of its header is written longer than it needs (the
    /// multiformats varint is minimal).
    #[error("the CID's header holds a varint longer than it needs to be")]
    Varint,
}

impl Cid {
    /// Parses and validates the strict text form.
    pub fn parse(s: &str) -> Result<Self, CidError> {
        let body = s.strip_prefix('b').ok_or(CidError::Multibase)?;
        let bytes = base32_lower_decode(body)?;
        let mut rest = &bytes[..];
        let version = read_uvarint(&mut rest)?;
        if version != 1 {
            return Err(CidError::Version(version));
        }
        let codec = read_uvarint(&mut rest)?;
        let mh_code = read_uvarint(&mut rest)?;
        let declared = read_uvarint(&mut rest)?;
        if declared != rest.len() as u64 {
            return Err(CidError::DigestLength {
                declared,
                actual: rest.len(),
            });
        }
        Ok(Self {
            text: s.to_owned(),
            codec,
            mh_code,
        })
    }

    /// Builds the CID of a digest: `0x01 ‖ varint(codec) ‖ varint(mh) ‖
    /// varint(len) ‖ digest`, written `b` + base32 lower case. The codes
    /// are below 2^63, the most a CID's 9-byte varint holds.
    pub fn from_digest(codec: u64, mh_code: u64, digest: &[u8]) -> Self {
        let mut bytes = Vec::with_capacity(digest.len() + 12);
        bytes.push(1);
        write_uvarint(&mut bytes, codec);
        write_uvarint(&mut bytes, mh_code);
        write_uvarint(&mut bytes, digest.len() as u64);
        bytes.extend_from_slice(digest);
        let text = format!("b{}", base32_lower_encode(&bytes));
        Self {
            text,
            codec,
            mh_code,
        }
    }

    /// The midhash256 CID of a 32-byte digest (codec and multihash 0x1000).
    pub fn midhash256(digest: &[u8; 32]) -> Self {
        Self::from_digest(code::MIDHASH256, code::MIDHASH256, digest)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The digest the CID carries, decoded from its text (checked when the
    /// CID was made).
    pub fn digest(&self) -> Vec<u8> {
        let bytes = base32_lower_decode(&self.text[1..]).expect("a checked CID decodes");
        let mut rest = &bytes[..];
        for _ in 0..4 {
            read_uvarint(&mut rest).expect("a checked CID has its header");
        }
        rest.to_vec()
    }

    pub fn codec(&self) -> u64 {
        self.codec
    }

    pub fn mh_code(&self) -> u64 {
        self.mh_code
    }

    /// The tier of the ladder (40, 30, 25, 20, 10, 5 or 0), checked in the
    /// order the original checks it.
    pub fn rank(&self) -> u8 {
        use code::*;
        let (c, m) = (self.codec, self.mh_code);
        if c == DAG_PB {
            return 40;
        }
        if [BTIH_V1_FILE, BTIH_V2_FILE, BTIH_V2]
            .iter()
            .any(|&x| c == x || m == x)
        {
            return 20;
        }
        if (NZB_RELEASE..=PROVIDER_FILE).contains(&c) {
            return 5;
        }
        // Before the multihash switch: an nzb posting carries a real sha2-256.
        if c == NZB_POSTING {
            return 25;
        }
        match m {
            SHA2_256 | SHA3_256 | SHA3_384 => 30,
            MIDHASH256 => 10,
            _ => 0,
        }
    }
}

/// The rank of any string: 0 when it is not an accepted CID.
pub fn rank(s: &str) -> u8 {
    Cid::parse(s).map(|c| c.rank()).unwrap_or(0)
}

/// Whether `a` beats (or ties and so is kept over) `b`: the higher rank wins,
/// and on a tie the byte-wise smaller string.
pub fn better(a: &str, b: &str) -> bool {
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra > rb;
    }
    a <= b
}

/// The canonical CID of a set of members: `better` folded over them.
pub fn canonical<'a, I: IntoIterator<Item = &'a str>>(members: I) -> Option<&'a str> {
    members
        .into_iter()
        .map(|m| (rank(m), m))
        .reduce(|best, cur| {
            if cur.0 > best.0 || (cur.0 == best.0 && cur.1 < best.1) {
                cur
            } else {
                best
            }
        })
        .map(|(_, m)| m)
}

impl fmt::Display for Cid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Cid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cid({})", self.text)
    }
}

impl FromStr for Cid {
    type Err = CidError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

crate::serde_as_text!(Cid);

pub(crate) const B32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

fn b32_value(c: u8) -> Option<u8> {
    match c {
        b'a'..=b'z' => Some(c - b'a'),
        b'2'..=b'7' => Some(c - b'2' + 26),
        _ => None,
    }
}

fn base32_lower_decode(s: &str) -> Result<Vec<u8>, CidError> {
    // Unpadded base32 leaves 0, 2, 4, 5 or 7 characters in the last group.
    if matches!(s.len() % 8, 1 | 3 | 6) {
        return Err(CidError::Padding);
    }
    let mut out = Vec::with_capacity(s.len() * 5 / 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for ch in s.chars() {
        let v = u8::try_from(ch)
            .ok()
            .and_then(b32_value)
            .ok_or(CidError::Alphabet(ch))?;
        acc = (acc << 5) | u32::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Unpadded base32 ends with zero bits; other bits there would make a
    // second spelling of the same bytes.
    if acc != 0 {
        return Err(CidError::TrailingBits);
    }
    Ok(out)
}

pub(crate) fn base32_lower_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(B32[((acc >> bits) & 31) as usize] as char);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(B32[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

fn read_uvarint(buf: &mut &[u8]) -> Result<u64, CidError> {
    let mut value = 0u64;
    for i in 0..9 {
        let (&b, rest) = buf.split_first().ok_or(CidError::Truncated)?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // A last byte of 0 after others is padding: not minimal.
            if i > 0 && b == 0 {
                return Err(CidError::Varint);
            }
            return Ok(value);
        }
    }
    Err(CidError::Truncated)
}

fn write_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cid_gives_back_its_digest() {
        let digest = [7u8; 32];
        let cid = Cid::midhash256(&digest);
        assert_eq!(cid.digest(), digest);
        assert_eq!(Cid::parse(cid.as_str()).unwrap().digest(), digest);
    }

    #[test]
    fn base32_round_trips() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let s = base32_lower_encode(&bytes);
            assert_eq!(base32_lower_decode(&s).unwrap(), bytes);
        }
    }

    #[test]
    fn midhash_cid_shape() {
        let c = Cid::midhash256(&[0u8; 32]);
        assert_eq!(c.as_str().len(), 62);
        assert!(c.as_str().starts_with("bagacbab"));
        assert_eq!(Cid::parse(c.as_str()).unwrap(), c);
        assert_eq!(c.rank(), 10);
    }

    #[test]
    fn strictness() {
        let good = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert!(Cid::parse(good).is_ok());
        assert_eq!(Cid::parse(&good.to_uppercase()), Err(CidError::Multibase));
        assert!(matches!(
            Cid::parse(&format!("b{}", &good[1..].to_uppercase())),
            Err(CidError::Alphabet(_))
        ));
        assert!(
            Cid::parse(&good[..good.len() - 2]).is_err(),
            "a cut digest is refused"
        );
        assert!(Cid::parse("b").is_err());
        assert!(Cid::parse("bafy/../x").is_err());
    }

    /// Found by the property tests: `...ab` decoded to the bytes of
    /// `...aa` (the last letter's unused bits dropped), so one CID had two
    /// spellings, two `cid:` keys.
    #[test]
    fn a_cid_has_one_spelling() {
        let canonical = "bagaacaagaaaaaaaaaa";
        let c = Cid::parse(canonical).unwrap();
        assert_eq!(Cid::from_digest(c.codec(), c.mh_code(), &c.digest()), c);
        assert_eq!(
            Cid::parse("bagaacaagaaaaaaaaab"),
            Err(CidError::TrailingBits)
        );
        // Codec 0x55 written in two bytes (0xd5 0x00) instead of one.
        let padded = [1u8, 0xd5, 0x00, 0x12, 0x00];
        let minimal = Cid::from_digest(0x55, 0x12, &[]);
        assert!(Cid::parse(minimal.as_str()).is_ok());
        let text = format!("b{}", base32_lower_encode(&padded));
        assert_eq!(Cid::parse(&text), Err(CidError::Varint));
        assert_eq!(
            read_uvarint(&mut &[0x80u8, 0x00][..]),
            Err(CidError::Varint)
        );
        assert_eq!(read_uvarint(&mut &[0x00u8][..]), Ok(0));
        assert_eq!(read_uvarint(&mut &[0x80u8, 0x01][..]), Ok(128));
    }

    #[test]
    fn better_breaks_ties_on_the_smaller_string() {
        let a = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let b = "bafkreibaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert!(better(a, b));
        assert!(!better(b, a));
        assert!(better(a, a));
        assert_eq!(canonical([b, a]), Some(a));
        assert_eq!(canonical(std::iter::empty()), None);
    }
}
