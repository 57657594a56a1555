//! A request's query parameters (`limit`, `continue`, `watch`, `fieldManager`, ...).

/// The decoded `name=value` pairs, in order.
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(query: &str) -> Self {
        Self(
            url::form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("1" | "true"))
    }
}
