//! The environment variables the clouds' identity webhooks inject, read once into a value so the
//! providers are pure in what they read (tests build an [`Env`] instead of setting variables).

use std::collections::BTreeMap;

/// The variables every provider may read.
const NAMES: &[&str] = &[
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_ECR",
    "GCE_METADATA_HOST",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_AUTHORITY_HOST",
];

/// A snapshot of the cloud identity variables. Empty values count as unset.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: AWS_SECRET_ACCESS_KEY and friends are secrets.
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl Env {
    /// The process environment.
    pub fn from_process() -> Self {
        Self::from_pairs(
            NAMES
                .iter()
                .filter_map(|name| std::env::var(name).ok().map(|value| (*name, value))),
        )
    }

    /// The given variables (tests, or a caller with its own source).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let vars = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        Self { vars }
    }

    /// One variable, `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub fn aws_region(&self) -> Option<&str> {
        self.get("AWS_REGION")
            .or_else(|| self.get("AWS_DEFAULT_REGION"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_are_unset_and_debug_shows_names_only() {
        let env = Env::from_pairs([
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_REGION", ""),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
        ]);
        assert_eq!(env.aws_region(), Some("eu-west-1"));
        let printed = format!("{env:?}");
        assert!(!printed.contains("wJalr"), "{printed}");
        assert!(printed.contains("AWS_SECRET_ACCESS_KEY"));
    }
}
