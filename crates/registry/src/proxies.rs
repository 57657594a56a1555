//! `--registry-proxies`: glob rules on the registry host (Go's `filepath.Match`, as noe uses, see
//! [`crate::glob`]), chained in order as noe does (each rule rewrites the result of the previous
//! one). The repository path is never changed.

use crate::Reference;

/// Applies every matching rule in order and returns the registry host to contact.
pub fn rewrite_host(rules: &[(String, String)], host: &str) -> String {
    let mut current = host.to_owned();
    for (pattern, replacement) in rules {
        if noe_credentials::glob::matches_ignore_case(pattern, &current) {
            current.clone_from(replacement);
        }
    }
    current
}

/// The reference as it is fetched: same repository, tag and digest, registry after proxies.
pub fn apply(rules: &[(String, String)], reference: &Reference) -> Reference {
    let host = rewrite_host(rules, &reference.registry);
    if host == reference.registry {
        reference.clone()
    } else {
        reference.with_registry(&host)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rules_chain_in_order_and_keep_the_path() {
        let rules = vec![
            ("docker.io".to_owned(), "mirror.corp".to_owned()),
            ("mirror.*".to_owned(), "proxy.corp:5000".to_owned()),
            ("quay.io".to_owned(), "quay-proxy.corp".to_owned()),
        ];
        let r = Reference::parse("nginx:1.27").unwrap();
        let proxied = apply(&rules, &r);
        assert_eq!(proxied.to_string(), "proxy.corp:5000/library/nginx:1.27");
        assert_eq!(proxied.endpoint(), "proxy.corp:5000");
        let untouched = Reference::parse("ghcr.io/org/app").unwrap();
        assert_eq!(apply(&rules, &untouched), untouched);
        assert_eq!(rewrite_host(&rules, "quay.io"), "quay-proxy.corp");
    }
}
