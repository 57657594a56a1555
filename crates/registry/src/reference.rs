//! Image references, parsed and normalized as the distribution reference grammar (and Docker) do:
//! `nginx` is `docker.io/library/nginx:latest`, served by `registry-1.docker.io`.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// The registry name Docker Hub images normalize to.
pub const DOCKER_HUB: &str = "docker.io";
/// The host actually serving Docker Hub's registry API.
pub const DOCKER_HUB_ENDPOINT: &str = "registry-1.docker.io";
const LEGACY_DOCKER_HUB: &str = "index.docker.io";
const NAME_MAX: usize = 255;
const TAG_MAX: usize = 128;

/// A normalized image reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `docker.io`, `ghcr.io`, `localhost:5000`, `[::1]:5000`, ...
    pub registry: String,
    /// `library/nginx`, `org/app`, ...
    pub repository: String,
    /// The tag; `latest` when neither a tag nor a digest was given.
    pub tag: Option<String>,
    /// `sha256:...` when given; a digest wins over the tag when fetching.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses and normalizes `input`; errors name the reference and the broken part.
    pub fn parse(input: &str) -> Result<Self, Error> {
        let bad = |reason: &str| Error::invalid_reference(input, reason);
        if input.is_empty() {
            return Err(bad("empty reference"));
        }
        if input.len() == 64 && input.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(
                "a 64-character hexadecimal string is an image ID, not a reference",
            ));
        }
        let (rest, digest) = match input.split_once('@') {
            Some((rest, digest)) => {
                validate_digest(digest).map_err(|reason| bad(&reason))?;
                (rest, Some(digest.to_owned()))
            }
            None => (input, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let (name, tag) = rest.split_at(last_slash + i);
                let tag = &tag[1..];
                validate_tag(tag).map_err(|reason| bad(&reason))?;
                (name, Some(tag.to_owned()))
            }
            None => (rest, None),
        };
        if name.is_empty() {
            return Err(bad("missing repository name"));
        }
        let (registry, repository) = split_registry(name);
        validate_registry(&registry).map_err(|reason| bad(&reason))?;
        validate_repository(&repository).map_err(|reason| bad(&reason))?;
        // Since distribution/reference v0.6.0 the limit applies to the path alone.
        if repository.len() > NAME_MAX {
            return Err(bad("repository path longer than 255 characters"));
        }
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            (tag, _) => tag,
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The host (and port) to send API requests to.
    pub fn endpoint(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_ENDPOINT
        } else {
            &self.registry
        }
    }

    /// `registry/repository`, without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// What to ask `/v2/<repo>/manifests/` for: the digest when there is one, else the tag.
    pub fn object(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same repository path on another registry host (used by proxies).
    pub fn with_registry(&self, registry: &str) -> Self {
        let registry = if registry == LEGACY_DOCKER_HUB {
            DOCKER_HUB
        } else {
            registry
        };
        Self {
            registry: registry.to_owned(),
            ..self.clone()
        }
    }
}

impl FromStr for Reference {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Docker's rule: the first component is a registry when it has a `.` or `:`, is `localhost`, or
/// has upper-case letters (which a repository may not have).
fn split_registry(name: &str) -> (String, String) {
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            (first, rest)
        }
        _ => (DOCKER_HUB, name),
    };
    let registry = if registry == LEGACY_DOCKER_HUB {
        DOCKER_HUB
    } else {
        registry
    };
    let repository = if registry == DOCKER_HUB && !repository.contains('/') {
        format!("library/{repository}")
    } else {
        repository.to_owned()
    };
    (registry.to_owned(), repository)
}

fn validate_registry(registry: &str) -> Result<(), String> {
    let err = || format!("invalid registry host {registry:?}");
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').ok_or_else(err)?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Err(err());
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(err)?),
        };
        (None, port)
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(registry), None),
        }
    };
    if let Some(port) = port {
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
    }
    if let Some(host) = host {
        let label_ok = |label: &str| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !host.split('.').all(label_ok) {
            return Err(err());
        }
    }
    Ok(())
}

fn validate_repository(repository: &str) -> Result<(), String> {
    if repository.chars().any(|c| c.is_ascii_uppercase()) {
        return Err("repository name must be lowercase".to_owned());
    }
    for component in repository.split('/') {
        if !path_component_ok(component) {
            return Err(format!("invalid repository path component {component:?}"));
        }
    }
    Ok(())
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn path_component_ok(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    let mut expect_alnum = true;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            while i < bytes.len() && alnum(bytes[i]) {
                i += 1;
            }
            expect_alnum = false;
            continue;
        }
        if expect_alnum {
            return false;
        }
        let sep_start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
        debug_assert!(i > sep_start);
        expect_alnum = true;
    }
    !bytes.is_empty() && !expect_alnum
}

pub(crate) fn validate_tag(tag: &str) -> Result<(), String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= TAG_MAX
        && word(bytes[0])
        && bytes[1..]
            .iter()
            .all(|&b| word(b) || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid tag {tag:?}"))
    }
}

/// Validates `algorithm:hex`; only sha256 and sha512 are supported, as in go-digest.
pub(crate) fn validate_digest(digest: &str) -> Result<(), String> {
    let (algorithm, encoded) = digest
        .split_once(':')
        .ok_or_else(|| format!("invalid digest {digest:?}"))?;
    let len = match algorithm {
        "sha256" => 64,
        "sha512" => 128,
        _ => return Err(format!("unsupported digest algorithm {algorithm:?}")),
    };
    if encoded.len() != len
        || !encoded
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("invalid {algorithm} digest {digest:?}"));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "reference/tests.rs"]
mod tests;
