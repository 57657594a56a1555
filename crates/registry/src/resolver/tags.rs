//! A repository's tags (`GET /v2/NAME/tags/list?n=1000`, then each `Link: <…>; rel="next"`
//! page): a [`Step`] of the lookup's own endpoint and credential loop (`lookup.rs`), so the
//! same proxies, credentials in order then anonymous access (unless private), insecure
//! registries, TLS, address guard and throttle as the image's manifests. Asked of the registry
//! itself, never of a mirror (a pull-through cache lists only what was pulled through it).
//!
//! Bounded: [`MAX_TAGS`] tags (the list is cut there, and says so), [`MAX_TAG_PAGES`] pages,
//! a page's body the client's body limit; a `Link` to another origin, or back to a page
//! already read, ends the list; tags that are not valid tags are skipped.

use futures::future::BoxFuture;
use noe_credentials::CredentialCandidate;
use serde::Deserialize;

use super::fetch::{At, Step};
use super::{Resolver, Routed};
use crate::artifacts::next_page;
use crate::metrics::Kind;
use crate::walk::Fetcher;
use crate::Error;
pub use noe_core::upgrade::MAX_TAGS;

/// Tags asked for per page.
pub const PAGE_SIZE: usize = 1000;
/// Pages read at most (a registry may answer fewer tags per page than asked).
pub const MAX_TAG_PAGES: usize = 100;

/// A repository's tags as its registry lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tags {
    /// In the registry's order, valid tags only, at most [`MAX_TAGS`].
    pub tags: Vec<String>,
    /// Pages read (each one request).
    pub pages: usize,
    /// The list was cut at [`MAX_TAGS`] tags or [`MAX_TAG_PAGES`] pages.
    pub truncated: bool,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

struct List;

impl Step for List {
    type Output = Tags;

    fn budget(&self) -> usize {
        // Every page, and the token requests of a challenge on the way.
        MAX_TAG_PAGES.saturating_add(4)
    }

    fn fetch<'s, 'a>(&'s self, at: At<'s, 'a>) -> BoxFuture<'s, Result<Tags, Error>> {
        Box::pin(async move { list(&at.fetcher()).await })
    }
}

impl Resolver {
    /// The tags of `routed`'s repository, from the registry (after proxies) with
    /// `credentials` as a lookup uses them (mirrors left out).
    pub async fn tags(
        &self,
        routed: &Routed,
        credentials: &[CredentialCandidate],
    ) -> Result<Tags, Error> {
        let request = routed.request(credentials, false);
        let (tags, _) = self
            .fetch(&request, &List)
            .await
            .inspect_err(|e| self.count_error(e))?;
        Ok(tags)
    }
}

async fn list(fetcher: &Fetcher<'_>) -> Result<Tags, Error> {
    let session = fetcher.session;
    let invalid = |reason: String| Error::InvalidContent {
        reference: session.ctx.reference.clone(),
        registry: session.ctx.registry.clone(),
        what: "tag list",
        reason: crate::error::bounded(&reason, 256).into_owned(),
    };
    let mut url = session
        .base
        .join(&format!("{}/tags/list", session.repository))
        .map_err(|e| invalid(format!("cannot build a URL ({e})")))?;
    url.query_pairs_mut()
        .append_pair("n", &PAGE_SIZE.to_string());
    let mut out = Tags::default();
    let mut seen = vec![url.clone()];
    loop {
        let response = fetcher
            .auth
            .get(fetcher.http, session, url.clone(), None, Kind::Tags)
            .await?;
        let response = fetcher.check_status(response)?;
        out.pages = out.pages.saturating_add(1);
        let page: Page = serde_json::from_slice(&response.body)
            .map_err(|e| invalid(format!("not a tag list ({e})")))?;
        for tag in page.tags.unwrap_or_default() {
            if out.tags.len() == MAX_TAGS {
                out.truncated = true;
                break;
            }
            if crate::reference::validate_tag(&tag).is_ok() {
                out.tags.push(tag);
            }
        }
        if out.truncated {
            return Ok(out);
        }
        match next_page(&response.headers, &response.url) {
            Some(next) if seen.contains(&next) => return Ok(out),
            Some(_) if out.pages >= MAX_TAG_PAGES || out.tags.len() >= MAX_TAGS => {
                out.truncated = true;
                return Ok(out);
            }
            Some(next) => {
                seen.push(next.clone());
                url = next;
            }
            None => return Ok(out),
        }
    }
}
