use super::*;

/// The query types leave out what is absent (serde_urlencoded skips
/// `None`), and read an empty `after=` as absent.
#[test]
fn queries_leave_out_what_is_absent() {
    fn q<T: Serialize>(v: &T) -> String {
        serde_urlencoded::to_string(v).unwrap()
    }
    assert_eq!(q(&PageQuery::default()), "");
    assert_eq!(q(&RangeQuery::default()), "keysOnly=false");
    assert_eq!(q(&EntriesQuery::default()), "");
    let page = PageQuery {
        offset: Some(3),
        ..PageQuery::default()
    };
    assert_eq!(q(&page), "offset=3");
    let back: PageQuery = serde_urlencoded::from_str("after=&limit=2").unwrap();
    assert_eq!(
        back,
        PageQuery {
            limit: Some(2),
            ..PageQuery::default()
        }
    );
    let fields = FieldsPageQuery {
        names: "a,b".into(),
        page,
    };
    assert_eq!(q(&fields), "names=a%2Cb&offset=3");
}
