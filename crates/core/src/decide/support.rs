//! Steps 4–6: the architectures each image can use on the pod's OS, failed lookups, the
//! intersection.

use std::collections::BTreeSet;

use crate::Platform;

use super::pod::ImageKind;
use super::{text, Lookups, OnLookupError, Policy};

/// The error of a container image whose registry lists no platform: noe-rs never assumes amd64.
pub(crate) const NO_PLATFORM: &str = "the registry lists no platform for it";
/// The error of an image missing from the lookups.
pub(crate) const NO_RESULT: &str = "no lookup result";

/// An image whose platforms are known.
#[derive(Debug)]
pub(crate) struct Resolved<'a> {
    pub image: &'a str,
    /// The architectures a pod of this OS may use: OS equal or empty, arch schedulable.
    pub usable: BTreeSet<&'a str>,
    /// Every platform the registry lists (what messages show).
    pub platforms: &'a [Platform],
    /// Some platform was left out for its OS.
    pub other_os: bool,
    /// `--on-lookup-error=fallback`: the platforms were not found, the fallback arch is assumed.
    pub assumed: bool,
}

/// An image whose platforms could not be found.
#[derive(Debug)]
pub(crate) struct Failed<'a> {
    pub image: &'a str,
    pub error: &'a str,
}

/// Every image of the plan, resolved or failed; arch-neutral images (image volumes without a
/// platform, images a platform override declares `*`) are in neither.
#[derive(Debug, Default)]
pub(crate) struct Resolution<'a> {
    pub resolved: Vec<Resolved<'a>>,
    pub failed: Vec<Failed<'a>>,
}

/// The architectures of `platforms` a pod of `os` can use: OS equal to the pod's or empty,
/// architecture schedulable and non-empty; variants ignored.
fn usable<'a>(platforms: &'a [Platform], os: &str, policy: &Policy) -> (BTreeSet<&'a str>, bool) {
    let mut other_os = false;
    let mut archs = BTreeSet::new();
    for platform in platforms {
        if !platform.os.is_empty() && platform.os != os {
            other_os = true;
            continue;
        }
        if !platform.architecture.is_empty() && policy.is_schedulable(&platform.architecture) {
            archs.insert(platform.architecture.as_str());
        }
    }
    (archs, other_os)
}

/// Resolves every image against the lookups. With `--on-lookup-error=fallback` (and a fallback
/// arch), a failed image is resolved to the fallback arch instead.
pub(crate) fn resolve<'a>(
    images: &[(&'a str, ImageKind)],
    lookups: &'a Lookups,
    os: &str,
    policy: &'a Policy,
) -> Resolution<'a> {
    let mut out = Resolution::default();
    for &(image, kind) in images {
        let error = match lookups.get(image) {
            Some(Ok(platforms)) if platforms.is_empty() && kind == ImageKind::Volume => continue,
            Some(Ok(platforms)) if platforms.iter().any(Platform::is_any) => continue,
            Some(Ok(platforms)) if platforms.is_empty() => NO_PLATFORM,
            Some(Ok(platforms)) => {
                let (usable, other_os) = usable(platforms, os, policy);
                out.resolved.push(Resolved {
                    image,
                    usable,
                    platforms,
                    other_os,
                    assumed: false,
                });
                continue;
            }
            Some(Err(error)) => error.as_str(),
            None => NO_RESULT,
        };
        out.failed.push(Failed { image, error });
    }
    out
}

/// Step 5 with `fallback`: failed images resolved to the fallback arch. Returns the images that
/// fell back (for their warnings).
pub(crate) fn fall_back<'a>(
    resolution: &mut Resolution<'a>,
    policy: &'a Policy,
) -> Vec<Failed<'a>> {
    let Some(arch) = policy
        .fallback()
        .filter(|_| policy.on_lookup_error == OnLookupError::Fallback)
    else {
        return Vec::new();
    };
    let failed = std::mem::take(&mut resolution.failed);
    for failure in &failed {
        resolution.resolved.push(Resolved {
            image: failure.image,
            usable: Some(arch)
                .filter(|a| policy.is_schedulable(a))
                .into_iter()
                .collect(),
            platforms: &[],
            other_os: false,
            assumed: true,
        });
    }
    failed
}

/// The architectures every resolved image can use; `None` when no image was resolved.
pub(crate) fn common<'a>(resolved: &[Resolved<'a>]) -> Option<BTreeSet<&'a str>> {
    let (first, rest) = resolved.split_first()?;
    let mut common = first.usable.clone();
    for image in rest {
        common.retain(|a| image.usable.contains(a));
    }
    Some(common)
}

/// `app:1 [linux/amd64], sidecar:2 [linux/s390x]`: each image with the platforms it really has.
pub(crate) fn describe(resolved: &[Resolved<'_>], policy: &Policy) -> String {
    text::list(resolved.iter().map(|r| {
        if r.assumed {
            let fallback = policy.fallback().unwrap_or_default();
            format!("{} [assumed {fallback}]", text::image(r.image))
        } else {
            text::image_platforms(r.image, r.platforms)
        }
    }))
}

/// ` (pod OS: linux)` and ` (schedulable: amd64, arm64)` when they explain a denial.
pub(crate) fn context(resolved: &[Resolved<'_>], os: &str, policy: &Policy) -> String {
    let mut out = String::new();
    if resolved.iter().any(|r| r.other_os) {
        out.push_str(&format!(" (pod OS: {})", text::truncate(os, 64)));
    }
    if !policy.schedulable_from_nodes && !policy.schedulable_archs.is_empty() {
        out.push_str(&format!(
            " (schedulable: {})",
            text::list(&policy.schedulable_archs)
        ));
    }
    out
}
