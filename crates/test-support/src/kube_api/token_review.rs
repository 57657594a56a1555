//! `POST /apis/authentication.k8s.io/v1/tokenreviews`, answered as the apiserver does: `201`
//! with the review's `status` — `authenticated: true`, the token's user and the requested
//! audiences it is valid for; `authenticated: false` and an `error` for an unknown token or one
//! valid for none of them (a request without audiences is checked against the token's, the way
//! the apiserver checks it against its own).

use serde_json::{json, Value};

/// A token the scripted API accepts.
#[derive(Clone, Debug)]
pub(crate) struct ScriptedToken {
    pub(crate) username: String,
    pub(crate) audiences: Vec<String>,
}

/// The TokenReview answered for `review` (the request body) with the scripted `tokens`.
pub(crate) fn answer(
    tokens: &std::collections::BTreeMap<String, ScriptedToken>,
    review: &Value,
) -> Result<Value, String> {
    if review["kind"] != "TokenReview" {
        return Err("the body is not a TokenReview".to_owned());
    }
    let Some(token) = review["spec"]["token"].as_str().filter(|t| !t.is_empty()) else {
        return Err("spec.token: Required value".to_owned());
    };
    let asked: Vec<String> = review["spec"]["audiences"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let status = match tokens.get(token) {
        None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
        Some(scripted) => {
            let valid: Vec<&String> = if asked.is_empty() {
                scripted.audiences.iter().collect()
            } else {
                asked
                    .iter()
                    .filter(|a| scripted.audiences.contains(a))
                    .collect()
            };
            if valid.is_empty() {
                json!({"user": {}, "error": "[invalid bearer token, token audiences is invalid for the target audiences]"})
            } else {
                json!({
                    "authenticated": true,
                    "user": {
                        "username": scripted.username,
                        "uid": format!("uid-{}", scripted.username),
                        "groups": ["system:serviceaccounts", "system:authenticated"],
                    },
                    "audiences": valid,
                })
            }
        }
    };
    Ok(json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": review["spec"],
        "status": status,
    }))
}
