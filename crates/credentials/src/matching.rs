//! Kubelet-style image pattern matching (`matchImages`, credential provider `auth` keys, docker
//! config keys).
//!
//! A pattern is a scheme-less URL: `host[:port][/path]`. It matches an image reference when
//! - the hosts have the same number of DNS labels and each label of the pattern, which may be a
//!   glob ([`crate::glob`]: `*`, `?`, `[a-z]`), matches the image's label at the same position (so `*.k8s.io` matches
//!   `registry.k8s.io` but `*.io` does not: a glob never spans a dot);
//! - the ports are equal (a pattern without port only matches an image without port);
//! - the pattern's path is a string prefix of the image's path (the image may carry a tag or a
//!   digest).
//!
//! Host labels compare ASCII case-insensitively (DNS names are).

/// Whether `image` (e.g. `registry.k8s.io/pause:3.9`, `127.0.0.1:5000/app:1`) matches the kubelet
/// `matchImages` pattern `pattern` (e.g. `*.k8s.io`, `registry.io:8080/team`).
pub fn image_matches(pattern: &str, image: &str) -> bool {
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return false;
    }
    let (pattern_authority, pattern_path) = split_authority(pattern);
    let (image_authority, image_path) = split_authority(image);
    let (pattern_host, pattern_port) = split_host_port(pattern_authority);
    let (image_host, image_port) = split_host_port(image_authority);
    if pattern_port != image_port {
        return false;
    }
    if !image_path.starts_with(pattern_path) {
        return false;
    }
    if crate::glob::is_literal(pattern_host) {
        // Label by label without globs is the whole host compared.
        return pattern_host.eq_ignore_ascii_case(image_host);
    }
    if pattern_host.split('.').count() != image_host.split('.').count() {
        return false;
    }
    pattern_host
        .split('.')
        .zip(image_host.split('.'))
        .all(|(glob, label)| crate::glob::matches_ignore_case(glob, label))
}

/// Refuses a pattern that [`image_matches`] could never match as it was meant: a glob character
/// (`*`, `?`, `[`) in the path, which the kubelet compares as a literal prefix (`host/repo/*`
/// matches nothing; `host/repo` matches every repository under it). The error says why.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let (_, path) = split_authority(pattern.trim());
    if path.contains(['*', '?', '[']) {
        return Err(format!(
            "{:?} has a glob in its path, which matches nothing: a path is a literal prefix (write {:?} for everything under it)",
            pattern.chars().take(128).collect::<String>(),
            literal_prefix(pattern.trim()),
        ));
    }
    Ok(())
}

/// What a pattern with a glob in its path probably meant: its path up to the glob.
fn literal_prefix(pattern: &str) -> String {
    let end = pattern.find(['*', '?', '[']).unwrap_or(pattern.len());
    pattern
        .get(..end)
        .unwrap_or(pattern)
        .trim_end_matches('/')
        .chars()
        .take(128)
        .collect()
}

/// The registry host (with port) of a normalized image reference: everything before the first `/`.
pub fn image_host(image: &str) -> &str {
    split_authority(image).0
}

/// Docker Hub's host in a normalized reference.
pub const DOCKER_HUB: &str = "docker.io";

/// Docker Hub's historical names, all meaning the `docker.io` of a normalized reference.
const DOCKER_HUB_ALIASES: &[&str] = &[
    DOCKER_HUB,
    "index.docker.io",
    "registry-1.docker.io",
    "registry.hub.docker.com",
];

/// The key docker uses for Docker Hub in `config.json` and with credential helpers.
pub const DOCKER_HUB_CONFIG_KEY: &str = "https://index.docker.io/v1/";

/// Whether `host` (as found in a reference or config key) names Docker Hub.
pub fn is_docker_hub(host: &str) -> bool {
    DOCKER_HUB_ALIASES
        .iter()
        .any(|alias| alias.eq_ignore_ascii_case(host))
}

/// Turn a docker `config.json` `auths` key into a kubelet pattern, as the kubelet does: the scheme
/// is dropped, a leading `/v1/` or `/v2/` of the path is dropped, an empty path or `/` means the
/// whole registry. Docker Hub's names (`https://index.docker.io/v1/`, `index.docker.io`,
/// `registry-1.docker.io`, ...) become `docker.io`, the host of normalized references.
pub fn normalize_config_key(key: &str) -> String {
    let key = key.trim();
    let without_scheme = strip_prefix_ignore_case(key, "https://")
        .or_else(|| strip_prefix_ignore_case(key, "http://"))
        .unwrap_or(key);
    let (host, path) = split_authority(without_scheme);
    let path = if path.starts_with("/v1/") || path.starts_with("/v2/") {
        &path[3..]
    } else {
        path
    };
    let host = if is_docker_hub(host) {
        "docker.io".to_owned()
    } else {
        host.to_ascii_lowercase()
    };
    if path.is_empty() || path == "/" {
        host
    } else {
        format!("{host}{path}")
    }
}

/// Whether the docker config `auths` key `key` applies to `image`.
pub fn config_key_matches(key: &str, image: &str) -> bool {
    image_matches(&normalize_config_key(key), image)
}

/// The server name a docker credential helper is asked about for a registry host: Docker Hub is
/// `https://index.docker.io/v1/`, any other registry its host (with port).
pub fn helper_server_url(host: &str) -> String {
    if is_docker_hub(host) {
        DOCKER_HUB_CONFIG_KEY.to_owned()
    } else {
        host.to_owned()
    }
}

/// Sort patterns the way the kubelet orders its keyring: reverse lexical order, so that
/// `quay.io/team` comes before `quay.io` and `registry.io` before `*.io`-style wildcards sharing
/// a prefix.
pub fn sort_most_specific_first(patterns: &mut [String]) {
    patterns.sort_by(|a, b| b.cmp(a));
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host[:port]` and `/path...` (possibly empty) of a scheme-less URL.
fn split_authority(s: &str) -> (&str, &str) {
    match s.find('/') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// Host and port as Go's `net.SplitHostPort` sees them (an unparsable port keeps the whole
/// authority as the host, with no port).
fn split_host_port(authority: &str) -> (&str, &str) {
    if let Some(rest) = authority.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let host = &rest[..end];
            let after = &rest[end + 1..];
            return match after.strip_prefix(':') {
                Some(port) => (host, port),
                None if after.is_empty() => (host, ""),
                None => (authority, ""),
            };
        }
        return (authority, "");
    }
    match authority.split_once(':') {
        Some((host, port)) if !port.contains(':') => (host, port),
        _ => (authority, ""),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
