//! A plugin with `tokenAttributes` (KEP-4412): what it is told of the pod's service account,
//! decided as the kubelet decides it, and the part of its cache key that names the account.

use std::collections::BTreeMap;

use super::config::{TokenAttributes, TokenCacheType};
use crate::source::{ServiceAccountInfo, ServiceAccountToken};

/// What a plugin with `tokenAttributes` does for one pod, before any token is requested.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// Not run: no credential from this plugin (no service account but one is required, or a
    /// required annotation is missing).
    Skip(&'static str),
    /// Run without a token (the pod has no service account and none is required).
    Anonymous,
    /// Run with a token of the account and these annotations.
    Account {
        annotations: BTreeMap<String, String>,
    },
}

/// The kubelet's rules: no service account → skipped when required, else run without a
/// token; a service account lacking a required annotation → skipped; otherwise the required
/// annotations and the optional ones present are passed.
pub(super) fn plan(attributes: &TokenAttributes, account: Option<&ServiceAccountInfo>) -> Plan {
    let Some(account) = account else {
        return if attributes.require_service_account {
            Plan::Skip("the pod has no service account and the provider requires one")
        } else {
            Plan::Anonymous
        };
    };
    let mut annotations = BTreeMap::new();
    for key in &attributes.required_annotation_keys {
        match account.annotations.get(key) {
            Some(value) => {
                annotations.insert(key.clone(), value.clone());
            }
            None => return Plan::Skip("a required service account annotation is missing"),
        }
    }
    for key in &attributes.optional_annotation_keys {
        if let Some(value) = account.annotations.get(key) {
            annotations.insert(key.clone(), value.clone());
        }
    }
    Plan::Account { annotations }
}

/// The part of a cached answer's key that names the identity it was found with:
/// `cacheType: ServiceAccount` → the account (namespace, name, UID) and the annotations
/// passed; `cacheType: Token` → the same and the token itself. Length-prefixed, so no two
/// identities share a key.
pub(super) fn cache_key(
    cache_type: TokenCacheType,
    namespace: &str,
    name: &str,
    account: &ServiceAccountInfo,
    annotations: &BTreeMap<String, String>,
    token: Option<&ServiceAccountToken>,
) -> String {
    let mut key = String::new();
    let mut part = |text: &str| {
        key.push_str(&text.len().to_string());
        key.push(':');
        key.push_str(text);
    };
    part(namespace);
    part(name);
    part(&account.uid);
    part(&annotations.len().to_string());
    for (k, v) in annotations {
        part(k);
        part(v);
    }
    if cache_type == TokenCacheType::Token {
        part(token.map_or("", |t| t.token.as_str()));
    }
    key
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn attributes(require: bool, required: &[&str], optional: &[&str]) -> TokenAttributes {
        TokenAttributes {
            audience: "aud".into(),
            require_service_account: require,
            required_annotation_keys: required.iter().map(|k| (*k).to_owned()).collect(),
            optional_annotation_keys: optional.iter().map(|k| (*k).to_owned()).collect(),
            cache_type: TokenCacheType::ServiceAccount,
        }
    }

    fn account(annotations: &[(&str, &str)]) -> ServiceAccountInfo {
        ServiceAccountInfo {
            uid: "uid-1".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn plans_as_the_kubelet() {
        let annotated = account(&[("role", "r1"), ("tenant", "t1"), ("other", "x")]);
        let bare = account(&[]);
        let passed = |pairs: &[(&str, &str)]| Plan::Account {
            annotations: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        let cases = [
            (
                "no account, required",
                attributes(true, &[], &[]),
                None,
                "skip",
            ),
            (
                "no account, optional",
                attributes(false, &[], &[]),
                None,
                "anonymous",
            ),
            (
                "required present",
                attributes(true, &["role"], &["tenant", "absent"]),
                Some(&annotated),
                "account",
            ),
            (
                "required missing",
                attributes(true, &["role"], &[]),
                Some(&bare),
                "skip",
            ),
            (
                "nothing asked",
                attributes(false, &[], &[]),
                Some(&bare),
                "account",
            ),
        ];
        for (name, attributes, account, expected) in cases {
            let got = plan(&attributes, account);
            let kind = match &got {
                Plan::Skip(_) => "skip",
                Plan::Anonymous => "anonymous",
                Plan::Account { .. } => "account",
            };
            assert_eq!(kind, expected, "{name}");
        }
        assert_eq!(
            plan(
                &attributes(true, &["role"], &["tenant", "absent"]),
                Some(&annotated)
            ),
            passed(&[("role", "r1"), ("tenant", "t1")])
        );
    }

    #[test]
    fn cache_keys_name_the_identity() {
        let info = account(&[]);
        let none = BTreeMap::new();
        let token = |t: &str| ServiceAccountToken {
            token: t.into(),
            expires: std::time::SystemTime::UNIX_EPOCH,
        };
        let sa = |ns, name, t| {
            cache_key(
                TokenCacheType::ServiceAccount,
                ns,
                name,
                &info,
                &none,
                Some(&token(t)),
            )
        };
        assert_eq!(
            sa("a", "b", "t1"),
            sa("a", "b", "t2"),
            "the account, not the token"
        );
        assert_ne!(sa("a", "bc", "t1"), sa("ab", "c", "t1"));
        let by_token = |t| {
            cache_key(
                TokenCacheType::Token,
                "a",
                "b",
                &info,
                &none,
                Some(&token(t)),
            )
        };
        assert_ne!(by_token("t1"), by_token("t2"));
        let mut annotated = BTreeMap::new();
        annotated.insert("k".to_owned(), "v".to_owned());
        assert_ne!(
            cache_key(
                TokenCacheType::ServiceAccount,
                "a",
                "b",
                &info,
                &annotated,
                None
            ),
            cache_key(TokenCacheType::ServiceAccount, "a", "b", &info, &none, None)
        );
    }
}
