//! `WWW-Authenticate` suites of distribution, containerd and containers/image:
//! `challenge::parse_all`.

use std::path::Path;

use noe_registry::challenge::parse_all;

use super::table::{cases, id, load, same, text, Tally};

pub fn www_authenticate(dir: &Path) -> Tally {
    let table = load(dir, "www-authenticate.json");
    let mut tally = Tally::new("www-authenticate");
    for case in cases(&table, "cases") {
        let header = text(case, "header");
        let scheme = text(case, "scheme");
        let parsed = parse_all(header);
        let outcome = match parsed.iter().find(|(s, _)| s.eq_ignore_ascii_case(scheme)) {
            None => Err(format!("no {scheme} challenge in {parsed:?}")),
            Some((_, params)) => {
                let want = case["params"].as_object().cloned().unwrap_or_default();
                let exact = case["exact"] == true;
                let count = if exact {
                    same("parameter count", params.len(), want.len())
                } else {
                    Ok(())
                };
                count.and_then(|()| {
                    want.iter().try_for_each(|(name, value)| {
                        same(name, params.get(name).map(String::as_str), value.as_str())
                    })
                })
            }
        };
        tally.check(
            id(
                &format!("{} ({})", text(case, "test"), text(case, "origin")),
                header,
            ),
            outcome,
        );
    }
    tally
}
