//! `WWW-Authenticate` parsing (RFC 7235 challenges), as sent by registries on a 401.

use std::collections::BTreeMap;

/// Longest `realm`, `service` or `scope` accepted: challenges are remembered per registry, and
/// a registry controls their length. Real realms are short URLs.
pub const MAX_PARAM_LEN: usize = 2048;

/// A challenge this resolver can answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// Token auth: ask `realm` for a token for `service` and our scope.
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
    /// Send the credentials with every request.
    Basic { realm: Option<String> },
}

/// Parses one or more `WWW-Authenticate` header values and returns the best challenge:
/// Bearer (with a realm) first, else Basic. Unknown schemes are ignored, and so is a Bearer
/// challenge whose realm or service is longer than [`MAX_PARAM_LEN`] (a scope or Basic realm
/// that long is dropped: neither is used).
pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    let mut basic = None;
    let short = |value: &&String| value.len() <= MAX_PARAM_LEN;
    for value in values {
        for (scheme, params) in parse_all(value) {
            match scheme.to_ascii_lowercase().as_str() {
                "bearer" => {
                    let realm = params.get("realm").filter(|r| !r.is_empty());
                    let service = params.get("service");
                    if let Some(realm) = realm.filter(short) {
                        if service.is_none_or(|s| short(&s)) {
                            return Some(Challenge::Bearer {
                                realm: realm.clone(),
                                service: service.cloned(),
                                scope: params.get("scope").filter(short).cloned(),
                            });
                        }
                    }
                }
                "basic" if basic.is_none() => {
                    basic = Some(Challenge::Basic {
                        realm: params.get("realm").filter(short).cloned(),
                    });
                }
                _ => {}
            }
        }
    }
    basic
}

/// Every challenge of a header value: scheme and lower-cased parameter names.
pub fn parse_all(value: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let mut rest = value.trim_start();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        let token_len = rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == ',')
            .unwrap_or(rest.len());
        if token_len == 0 {
            break;
        }
        let token = &rest[..token_len];
        let after = rest[token_len..].trim_start_matches([' ', '\t']);
        if let Some(value_part) = after.strip_prefix('=').filter(|_| !out.is_empty()) {
            // `name=value` of the current challenge.
            let (param_value, remaining) = parse_value(value_part.trim_start());
            if let Some((_, params)) = out.last_mut() {
                params.insert(token.to_ascii_lowercase(), param_value);
            }
            rest = remaining;
        } else {
            // A new scheme (token68 forms are skipped: registries do not use them).
            out.push((token.to_owned(), BTreeMap::new()));
            rest = after;
        }
    }
    out
}

/// Reads a quoted-string (with `\` escapes) or a token; returns it and what follows.
fn parse_value(input: &str) -> (String, &str) {
    if let Some(quoted) = input.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                '"' => return (value, &quoted[i + 1..]),
                c => value.push(c),
            }
        }
        (value, "")
    } else {
        let end = input.find([',', ' ', '\t']).unwrap_or(input.len());
        (input[..end].to_owned(), &input[end..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(realm: &str, service: Option<&str>, scope: Option<&str>) -> Option<Challenge> {
        Some(Challenge::Bearer {
            realm: realm.into(),
            service: service.map(Into::into),
            scope: scope.map(Into::into),
        })
    }

    #[test]
    fn real_world_headers() {
        let cases: Vec<(&str, &str, Option<Challenge>)> = vec![
            (
                "docker hub",
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull""#,
                bearer(
                    "https://auth.docker.io/token",
                    Some("registry.docker.io"),
                    Some("repository:library/nginx:pull"),
                ),
            ),
            (
                "docker hub, insufficient scope",
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:x/y:pull",error="insufficient_scope""#,
                bearer(
                    "https://auth.docker.io/token",
                    Some("registry.docker.io"),
                    Some("repository:x/y:pull"),
                ),
            ),
            (
                "ghcr",
                r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:user/image:pull""#,
                bearer(
                    "https://ghcr.io/token",
                    Some("ghcr.io"),
                    Some("repository:user/image:pull"),
                ),
            ),
            (
                "quay",
                r#"Bearer realm="https://quay.io/v2/auth",service="quay.io""#,
                bearer("https://quay.io/v2/auth", Some("quay.io"), None),
            ),
            (
                "ecr",
                r#"Basic realm="https://123456789012.dkr.ecr.us-east-1.amazonaws.com/",service="ecr.amazonaws.com""#,
                Some(Challenge::Basic {
                    realm: Some("https://123456789012.dkr.ecr.us-east-1.amazonaws.com/".into()),
                }),
            ),
            (
                "gcr",
                r#"Bearer realm="https://gcr.io/v2/token",service="gcr.io",scope="repository:google-containers/pause:pull""#,
                bearer(
                    "https://gcr.io/v2/token",
                    Some("gcr.io"),
                    Some("repository:google-containers/pause:pull"),
                ),
            ),
            (
                "harbor",
                r#"Bearer realm="https://harbor.example.com/service/token",service="harbor-registry""#,
                bearer(
                    "https://harbor.example.com/service/token",
                    Some("harbor-registry"),
                    None,
                ),
            ),
            (
                "azure",
                r#"Bearer realm="https://myregistry.azurecr.io/oauth2/token",service="myregistry.azurecr.io""#,
                bearer(
                    "https://myregistry.azurecr.io/oauth2/token",
                    Some("myregistry.azurecr.io"),
                    None,
                ),
            ),
            (
                "distribution htpasswd",
                r#"Basic realm="basic-realm""#,
                Some(Challenge::Basic {
                    realm: Some("basic-realm".into()),
                }),
            ),
            (
                "spaces, lower-case scheme, unquoted token values",
                r#"bearer  realm = "https://r.example/t" , service=svc"#,
                bearer("https://r.example/t", Some("svc"), None),
            ),
            (
                "escaped quote and comma inside a quoted value",
                r#"Bearer realm="https://r.example/t?a=\"b,c\"",service="s""#,
                bearer(r#"https://r.example/t?a="b,c""#, Some("s"), None),
            ),
            (
                "two challenges in one value, Bearer preferred",
                r#"Basic realm="x", Bearer realm="https://r.example/t",service="s""#,
                bearer("https://r.example/t", Some("s"), None),
            ),
            (
                "bare basic",
                "Basic",
                Some(Challenge::Basic { realm: None }),
            ),
            (
                "bearer without realm is unusable",
                r#"Bearer service="s""#,
                None,
            ),
            ("unknown scheme", r#"Negotiate abc"#, None),
            ("empty", "", None),
            ("garbage", "=,,==\"", None),
        ];
        for (name, header, expected) in cases {
            assert_eq!(parse([header]), expected, "{name}: {header}");
        }
    }

    #[test]
    fn overlong_parameters_are_not_kept() {
        let long = "x".repeat(MAX_PARAM_LEN + 1);
        let realm = format!("https://r.example/{long}");
        assert_eq!(parse([format!(r#"Bearer realm="{realm}""#).as_str()]), None);
        assert_eq!(
            parse([format!(r#"Bearer realm="https://t",service="{long}""#).as_str()]),
            None
        );
        assert_eq!(
            parse([format!(r#"Bearer realm="https://t",scope="{long}""#).as_str()]),
            bearer("https://t", None, None)
        );
        assert_eq!(
            parse([format!(r#"Basic realm="{long}""#).as_str()]),
            Some(Challenge::Basic { realm: None })
        );
        // A usable Basic challenge is still found after an overlong Bearer one.
        assert_eq!(
            parse([format!(r#"Bearer realm="{realm}", Basic realm="r""#).as_str()]),
            Some(Challenge::Basic {
                realm: Some("r".into())
            })
        );
    }

    #[test]
    fn several_header_values() {
        let parsed = parse(["Basic realm=\"r\"", "Bearer realm=\"https://t\""]);
        assert_eq!(parsed, bearer("https://t", None, None));
    }
}
