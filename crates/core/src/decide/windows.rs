//! Windows pods (step 4 in docs/architecture.md): a Windows container runs only on a node of its
//! own Windows build, so a Windows pod is also constrained to the builds
//! (`node.kubernetes.io/windows-build`, `major.minor.build`) that every image offers.

use std::collections::BTreeSet;

use crate::Platform;
use serde_json::{json, Value};

use super::keys::WINDOWS_BUILD_LABEL;
use super::support::Resolved;
use super::text;

/// The pod OS that gets a Windows build constraint.
pub(crate) const WINDOWS: &str = "windows";

/// The `os.version` of a platform (Windows images carry it in their index entries and configs).
pub(crate) fn os_version(platform: &Platform) -> Option<&str> {
    platform.os_version.as_deref()
}

/// `10.0.17763.1879` → `10.0.17763`: the part of `os.version` a node's
/// `node.kubernetes.io/windows-build` label carries.
pub(crate) fn build_of(os_version: &str) -> Option<&str> {
    let mut dots = os_version.match_indices('.').map(|(i, _)| i);
    let (_, _) = (dots.next()?, dots.next()?);
    let end = dots.next().unwrap_or(os_version.len());
    let build = &os_version[..end];
    let parts_numeric = build
        .split('.')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    parts_numeric.then_some(build)
}

/// One platform as the build check reads it: OS, arch, `os.version`.
pub(crate) type PlatformBuild<'a> = (&'a str, &'a str, Option<&'a str>);

/// What the images say about Windows builds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Builds<'a> {
    /// Some image does not say (no Windows platform for these archs, or no `os.version`): no
    /// constraint.
    Unknown,
    /// The builds every image offers (non-empty).
    Common(BTreeSet<&'a str>),
    /// No build is offered by every image: each image with its builds.
    Disjoint(Vec<(&'a str, BTreeSet<&'a str>)>),
}

/// The builds every image offers for the archs `archs`.
pub(crate) fn builds<'a>(
    images: impl IntoIterator<Item = (&'a str, Vec<PlatformBuild<'a>>)>,
    archs: &BTreeSet<&str>,
) -> Builds<'a> {
    let mut per_image: Vec<(&'a str, BTreeSet<&'a str>)> = Vec::new();
    for (image, platforms) in images {
        let mut builds = BTreeSet::new();
        for (os, arch, version) in platforms {
            if os != WINDOWS || !archs.contains(arch) {
                continue;
            }
            match version.and_then(build_of) {
                Some(build) => builds.insert(build),
                None => return Builds::Unknown,
            };
        }
        if builds.is_empty() {
            return Builds::Unknown;
        }
        per_image.push((image, builds));
    }
    let mut sets = per_image.iter().map(|(_, builds)| builds);
    let Some(first) = sets.next() else {
        return Builds::Unknown;
    };
    let mut common = first.clone();
    for builds in sets {
        common.retain(|b| builds.contains(b));
    }
    if common.is_empty() {
        Builds::Disjoint(per_image)
    } else {
        Builds::Common(common)
    }
}

/// [`builds`] over resolved images (an image assumed by the fallback says nothing).
pub(crate) fn of_resolved<'a>(resolved: &[Resolved<'a>], archs: &BTreeSet<&str>) -> Builds<'a> {
    if resolved.iter().any(|r| r.assumed) {
        return Builds::Unknown;
    }
    builds(
        resolved.iter().map(|r| {
            let platforms = r
                .platforms
                .iter()
                .map(|p| (p.os.as_str(), p.architecture.as_str(), os_version(p)))
                .collect();
            (r.image, platforms)
        }),
        archs,
    )
}

/// `node.kubernetes.io/windows-build In [builds]`.
pub(crate) fn expression(builds: &BTreeSet<&str>) -> Value {
    json!({"key": WINDOWS_BUILD_LABEL, "operator": "In", "values": builds.iter().collect::<Vec<_>>()})
}

/// The denial of a pod whose images need different builds.
pub(crate) fn disjoint_message(per_image: &[(&str, BTreeSet<&str>)]) -> String {
    let images = text::list(
        per_image
            .iter()
            .map(|(image, builds)| format!("{} [{}]", text::image(image), text::list(builds))),
    );
    format!("no Windows build is supported by every container: {images}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_is_major_minor_build() {
        assert_eq!(build_of("10.0.17763.1879"), Some("10.0.17763"));
        assert_eq!(build_of("10.0.20348"), Some("10.0.20348"));
        for bad in ["10.0", "", "10..1", "a.b.c", "10.0.x.1"] {
            assert_eq!(build_of(bad), None, "{bad:?}");
        }
    }

    fn archs(list: &[&'static str]) -> BTreeSet<&'static str> {
        list.iter().copied().collect()
    }

    #[test]
    fn builds_intersect_across_images() {
        let ltsc2019 = ("windows", "amd64", Some("10.0.17763.1879"));
        let ltsc2022 = ("windows", "amd64", Some("10.0.20348.2113"));
        let amd = archs(&["amd64"]);
        assert_eq!(
            builds(
                [
                    ("a:1", vec![ltsc2019, ltsc2022, ("linux", "amd64", None)]),
                    ("b:1", vec![ltsc2022])
                ],
                &amd
            ),
            Builds::Common(BTreeSet::from(["10.0.20348"]))
        );
        assert_eq!(
            builds([("a:1", vec![ltsc2019]), ("b:1", vec![ltsc2022])], &amd),
            Builds::Disjoint(vec![
                ("a:1", BTreeSet::from(["10.0.17763"])),
                ("b:1", BTreeSet::from(["10.0.20348"]))
            ])
        );
        // An image without os.version, or without a Windows platform for the archs: unknown.
        let unknown = ("windows", "amd64", None);
        assert_eq!(
            builds([("a:1", vec![ltsc2019]), ("b:1", vec![unknown])], &amd),
            Builds::Unknown
        );
        assert_eq!(
            builds([("a:1", vec![ltsc2019])], &archs(&["arm64"])),
            Builds::Unknown
        );
        assert_eq!(
            disjoint_message(&[("a:1", BTreeSet::from(["10.0.17763"]))]),
            "no Windows build is supported by every container: a:1 [10.0.17763]"
        );
    }
}
