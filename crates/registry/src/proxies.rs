//! `--registry-proxies`: glob rules on the registry host, chained in order as noe does (each rule
//! rewrites the result of the previous one). The repository path is never changed.

use crate::Reference;

/// Applies every matching rule in order and returns the registry host to contact.
pub fn rewrite_host(rules: &[(String, String)], host: &str) -> String {
    let mut current = host.to_owned();
    for (pattern, replacement) in rules {
        if glob_match(pattern, &current) {
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

/// Shell-style glob over a host name: `*` any run of characters, `?` one character;
/// case-insensitive like DNS names.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            backtrack = Some((pi, ti));
            pi += 1;
        } else if let Some((star, matched)) = backtrack {
            pi = star + 1;
            ti = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let cases = [
            ("docker.io", "docker.io", true),
            ("docker.io", "ghcr.io", false),
            ("*.io", "ghcr.io", true),
            ("*", "anything:5000", true),
            ("registry-?.corp", "registry-1.corp", true),
            ("registry-?.corp", "registry-10.corp", false),
            ("*.DOCKER.io", "x.docker.io", true),
            ("quay.io*", "quay.io:443", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ];
        for (pattern, host, expected) in cases {
            assert_eq!(glob_match(pattern, host), expected, "{pattern} vs {host}");
        }
    }

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
