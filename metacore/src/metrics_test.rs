use prometheus_client::metrics::counter::Counter;

use super::*;

/// A part's exposition: its build info and one counter of its own at `n`.
fn part_text(part: Part, counter: &str, n: u64) -> String {
    let mut r = registry();
    register_build_info(&mut r, part);
    let c = Counter::<u64>::default();
    c.inc_by(n);
    r.register(counter, "A counter of this part", c);
    render(&[&r]).expect("renders")
}

fn scraped(part: Part, text: Option<String>) -> Scraped {
    Scraped {
        part,
        text,
        took: Duration::from_millis(3),
    }
}

/// The names of the families of `text` (the `# TYPE` lines), in order.
fn family_names(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect()
}

#[test]
fn a_rendered_registry_is_prefixed_and_ends_with_eof() {
    let text = part_text(Part::Daemon(Daemon::Storaged), "storaged_things", 2);
    assert!(text.ends_with("# EOF\n"), "{text}");
    let build = format!(
        "metacore_build_info{{daemon=\"storaged\",version=\"0.1.0\",protocol=\"{}\"}} 1\n",
        crate::socket::PROTOCOL_VERSION
    );
    assert!(text.contains(&build), "{text}");
    assert!(
        text.contains("metacore_storaged_things_total 2\n"),
        "{text}"
    );
    assert_eq!(
        family_names(&text),
        ["metacore_build", "metacore_storaged_things"]
    );
}

#[test]
fn parts_join_into_one_exposition_with_each_family_once() {
    let parts = [
        scraped(
            Part::Supervisor,
            Some(part_text(Part::Supervisor, "daemon_things", 1)),
        ),
        scraped(
            Part::Daemon(Daemon::Storaged),
            Some(part_text(
                Part::Daemon(Daemon::Storaged),
                "storaged_things",
                5,
            )),
        ),
        scraped(Part::Daemon(Daemon::Watcherd), None),
    ];
    let text = join(&parts).expect("joins");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"));
    let names = family_names(&text);
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(names.len(), unique.len(), "a family twice: {names:?}");
    assert_eq!(
        names,
        [
            "metacore_build",
            "metacore_daemon_things",
            "metacore_storaged_things",
            "metacore_scrape_ok",
            "metacore_scrape_duration_seconds"
        ]
    );
    // Both build infos under the one family, right after its metadata.
    let build: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("# TYPE metacore_build "))
        .skip(1)
        .take(2)
        .collect();
    assert!(build[0].contains("daemon=\"supervisor\""), "{text}");
    assert!(build[1].contains("daemon=\"storaged\""), "{text}");
    for (part, ok) in [("supervisor", 1), ("storaged", 1), ("watcherd", 0)] {
        let line = format!("metacore_scrape_ok{{daemon=\"{part}\"}} {ok}\n");
        assert!(text.contains(&line), "{line} in {text}");
    }
    assert!(text.contains("metacore_scrape_duration_seconds{daemon=\"watcherd\"} 0.003\n"));
}

#[test]
fn a_part_cut_short_or_not_openmetrics_is_left_out() {
    let whole = part_text(Part::Daemon(Daemon::Mountd), "mountd_things", 1);
    let cut = whole[..whole.len() - "# EOF\n".len()].to_owned();
    assert_eq!(
        families(&cut).unwrap_err(),
        Malformed("it does not end with # EOF")
    );
    for bad in [
        cut.clone(),
        "{\"error\":\"not_found\"}".to_owned(),
        "# a comment\n# EOF\n".to_owned(),
        "orphan_sample 1\n# EOF\n".to_owned(),
    ] {
        let text = join(&[scraped(Part::Daemon(Daemon::Mountd), Some(bad))]).expect("joins");
        assert!(!text.contains("mountd_things"), "{text}");
        assert!(
            text.contains("metacore_scrape_ok{daemon=\"mountd\"} 0\n"),
            "{text}"
        );
    }
}

#[test]
fn a_family_of_another_type_in_a_later_part_is_left_out() {
    let first = "# TYPE metacore_x counter\nmetacore_x_total 1\n# EOF\n";
    let second =
        "# TYPE metacore_x gauge\nmetacore_x 7\n# TYPE metacore_y gauge\nmetacore_y 2\n# EOF\n";
    let text = join(&[
        scraped(Part::Supervisor, Some(first.into())),
        scraped(Part::Daemon(Daemon::Apid), Some(second.into())),
    ])
    .expect("joins");
    assert!(text.contains("metacore_x_total 1\n") && !text.contains("metacore_x 7"));
    assert!(text.contains("metacore_y 2\n"), "{text}");
}
