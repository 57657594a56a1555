//! Step 2b, before anything reads the lookups: platform truth ([`crate::truth`]). Each image's
//! platforms lose those proven false for the digest it resolved to ([`Facts::corrections`]); the
//! decision then carries a warning per correction applied and the pod the
//! [`CORRECTIONS_ANNOTATION`](super::CORRECTIONS_ANNOTATION) naming them. An image whose every
//! platform is proven false supports no architecture: it is never arch-neutral, never a failed
//! lookup that `--on-lookup-error=ignore-image` would drop.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::facts::{Facts, Lookups};
use super::pod::ImageKind;
use super::text;
use crate::truth::{self, Correction};

/// The longest [`CORRECTIONS_ANNOTATION`](super::CORRECTIONS_ANNOTATION) value, in bytes: the
/// corrections past it are left out whole (their warnings still name them).
pub const MAX_ANNOTATION_BYTES: usize = 1024;

/// The corrections applied, by image (as written in the pod).
#[derive(Debug, Default)]
pub(crate) struct Applied<'f> {
    by_image: BTreeMap<&'f str, Vec<&'f Correction>>,
}

impl<'f> Applied<'f> {
    /// The corrections applied to `image` (empty when none).
    pub(crate) fn of(&self, image: &str) -> &[&'f Correction] {
        self.by_image.get(image).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_image.is_empty()
    }

    /// Each correction applied with its image, images in order.
    fn iter(&self) -> impl Iterator<Item = (&'f str, &'f Correction)> + '_ {
        self.by_image
            .iter()
            .flat_map(|(image, corrections)| corrections.iter().map(|c| (*image, *c)))
    }

    /// The decision's warnings: one per correction applied.
    pub(crate) fn warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.iter()
            .map(|(image, correction)| correction.warning(&text::image(image)))
    }
}

/// `lookups` with the corrections of `facts` for the pod's `images` applied, and what was
/// applied; `None` when no correction removes a platform (nothing is copied then).
pub(crate) fn apply<'f>(
    images: &[(&str, ImageKind)],
    lookups: &Lookups,
    facts: &'f Facts,
) -> Option<(Lookups, Applied<'f>)> {
    let mut corrected: Option<(Lookups, Applied<'f>)> = None;
    for (image, corrections) in &facts.corrections {
        if !images.iter().any(|(used, _)| used == image) {
            continue;
        }
        let Some(Ok(platforms)) = lookups.get(image) else {
            continue;
        };
        let result = truth::correct(platforms, corrections);
        if !result.changed() {
            continue;
        }
        let (lookups, applied) =
            corrected.get_or_insert_with(|| (lookups.clone(), Applied::default()));
        lookups.insert(image.clone(), Ok(Arc::from(result.kept)));
        applied.by_image.insert(image.as_str(), result.applied);
    }
    corrected
}

/// What a message says of an image's corrections:
/// `linux/arm64 proven false (verification: /app is an x86-64 ELF)`.
pub(crate) fn evidence(corrections: &[&Correction]) -> String {
    text::list(corrections.iter().map(|c| {
        format!(
            "{} proven false ({}: {})",
            c.platform,
            c.source,
            text::truncate(&c.evidence, 120)
        )
    }))
}

/// One entry of the annotation.
#[derive(Serialize)]
struct Entry<'a> {
    image: &'a str,
    platform: String,
    source: &'static str,
    evidence: &'a str,
}

/// The [`CORRECTIONS_ANNOTATION`](super::CORRECTIONS_ANNOTATION) value: a JSON array of
/// `{"image","platform","source","evidence"}`, at most [`MAX_ANNOTATION_BYTES`] (whole entries
/// only; image and evidence cut to 120 characters each).
pub(crate) fn annotation(applied: &Applied<'_>) -> String {
    let mut out = String::from("[");
    for (image, correction) in applied.iter() {
        let image = text::image(image);
        let evidence = text::truncate(&correction.evidence, 120);
        let entry = Entry {
            image: &image,
            platform: correction.platform.to_string(),
            source: correction.source.as_str(),
            evidence: &evidence,
        };
        let Ok(json) = serde_json::to_string(&entry) else {
            continue;
        };
        let separator = usize::from(out.len() > 1);
        let needed = out
            .len()
            .saturating_add(separator)
            .saturating_add(json.len())
            .saturating_add(1);
        if needed > MAX_ANNOTATION_BYTES {
            break;
        }
        if separator == 1 {
            out.push(',');
        }
        out.push_str(&json);
    }
    out.push(']');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::truth::Source;
    use crate::Platform;

    const IMAGES: [(&str, ImageKind); 3] = [
        ("app:1", ImageKind::Container),
        ("side:1", ImageKind::Container),
        ("other:1", ImageKind::Container),
    ];

    fn linux(arch: &str) -> Platform {
        Platform::new("linux", arch, None)
    }

    fn facts(entries: &[(&str, Correction)]) -> Facts {
        let mut facts = Facts::default();
        for (image, correction) in entries {
            facts
                .corrections
                .entry((*image).to_owned())
                .or_default()
                .push(correction.clone());
        }
        facts
    }

    fn arm64_false(digest: &str, evidence: &str) -> Correction {
        Correction::new(digest, linux("arm64"), Source::Verification, evidence)
    }

    #[test]
    fn only_the_corrected_images_change() {
        let mut lookups = Lookups::new();
        lookups.insert(
            "app:1".into(),
            Ok(Arc::from(vec![linux("amd64"), linux("arm64")])),
        );
        lookups.insert("side:1".into(), Ok(Arc::from(vec![linux("arm64")])));
        let facts = facts(&[("app:1", arm64_false("sha256:a", "/app is an x86-64 ELF"))]);
        let (corrected, applied) = apply(&IMAGES, &lookups, &facts).unwrap();
        assert_eq!(
            corrected["app:1"].as_ref().unwrap().as_ref(),
            &[linux("amd64")]
        );
        assert_eq!(corrected["side:1"], lookups["side:1"]);
        assert_eq!(applied.of("app:1").len(), 1);
        assert!(applied.of("side:1").is_empty());
        assert_eq!(
            applied.warnings().collect::<Vec<_>>(),
            ["image app:1: linux/arm64 is not used: verification: /app is an x86-64 ELF"]
        );
    }

    #[test]
    fn nothing_applies_nothing_is_copied() {
        let mut lookups = Lookups::new();
        lookups.insert("app:1".into(), Ok(Arc::from(vec![linux("amd64")])));
        assert!(apply(&IMAGES, &lookups, &Facts::default()).is_none());
        let facts = facts(&[("app:1", arm64_false("sha256:a", "x"))]);
        assert!(
            apply(&IMAGES, &lookups, &facts).is_none(),
            "no arm64 claimed"
        );
        let facts = facts_for_missing();
        assert!(
            apply(&IMAGES, &lookups, &facts).is_none(),
            "image not looked up"
        );
        lookups.insert("other:1".into(), Ok(Arc::from(vec![linux("arm64")])));
        let unused = [("app:1", ImageKind::Container)];
        assert!(
            apply(&unused, &lookups, &facts).is_none(),
            "not the pod's image"
        );
    }

    fn facts_for_missing() -> Facts {
        facts(&[("other:1", arm64_false("sha256:b", "x"))])
    }

    #[test]
    fn the_annotation_names_each_correction_within_its_bound() {
        let mut lookups = Lookups::new();
        let mut entries = Vec::new();
        for n in 0..20 {
            let image = format!("registry.example.com/team/app-{n}:1");
            lookups.insert(
                image.clone(),
                Ok(Arc::from(vec![linux("arm64"), linux("amd64")])),
            );
            entries.push((image, arm64_false("sha256:a", &"e".repeat(300))));
        }
        let entries: Vec<(&str, Correction)> = entries
            .iter()
            .map(|(i, c)| (i.as_str(), c.clone()))
            .collect();
        let facts = facts(&entries);
        let used: Vec<(&str, ImageKind)> = entries
            .iter()
            .map(|(image, _)| (*image, ImageKind::Container))
            .collect();
        let (_, applied) = apply(&used, &lookups, &facts).unwrap();
        let value = annotation(&applied);
        assert!(value.len() <= MAX_ANNOTATION_BYTES, "{}", value.len());
        let parsed: Vec<serde_json::Value> = serde_json::from_str(&value).unwrap();
        assert!(!parsed.is_empty() && parsed.len() < 20);
        assert_eq!(parsed[0]["platform"], "linux/arm64");
        assert_eq!(parsed[0]["source"], "verification");
        assert_eq!(parsed[0]["evidence"].as_str().unwrap().chars().count(), 120);

        let facts = facts_one();
        let mut lookups = Lookups::new();
        lookups.insert("app:1".into(), Ok(Arc::from(vec![linux("arm64")])));
        let (_, applied) = apply(&IMAGES, &lookups, &facts).unwrap();
        assert_eq!(
            annotation(&applied),
            r#"[{"image":"app:1","platform":"linux/arm64","source":"verification","evidence":"/app is an x86-64 ELF"}]"#
        );
    }

    fn facts_one() -> Facts {
        facts(&[("app:1", arm64_false("sha256:a", "/app is an x86-64 ELF"))])
    }

    /// Through the whole decision: what each form of the pod gets.
    #[test]
    fn decisions_with_corrections() {
        use crate::decide::{decide, plan, DenyReason, OnLookupError, Policy, Verdict};
        use serde_json::json;
        let pod = |images: &[&str]| {
            let containers: Vec<serde_json::Value> = images
                .iter()
                .enumerate()
                .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
                .collect();
            json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
        };
        let mut lookups = Lookups::new();
        lookups.insert(
            "both:1".into(),
            Ok(Arc::from(vec![linux("amd64"), linux("arm64")])),
        );
        lookups.insert("arm:1".into(), Ok(Arc::from(vec![linux("arm64")])));
        let evidence = "/app is an x86-64 ELF";
        let both = facts(&[("both:1", arm64_false("sha256:a", evidence))]);
        let arm = facts(&[("arm:1", arm64_false("sha256:b", evidence))]);
        let ignore = Policy {
            on_lookup_error: OnLookupError::IgnoreImage,
            ..Policy::default()
        };

        // Partly corrected: constrained to what is left, warned, annotated.
        let p = pod(&["both:1"]);
        let decision = decide(&plan(&p, &ignore), &lookups, &both, &ignore);
        let Verdict::Patch { common, ops } = &decision.verdict else {
            panic!("{:?}", decision.verdict);
        };
        assert_eq!(common, &["amd64"]);
        let text = serde_json::to_string(ops).unwrap();
        assert!(text.contains("arch.noe.adevinta.com/corrections"), "{text}");
        assert_eq!(
            decision.warnings,
            [format!(
                "image both:1: linux/arm64 is not used: verification: {evidence}"
            )]
        );
        assert_eq!(decision.summary.images[0].corrections.len(), 1);

        // Every platform corrected: no architecture, never dropped like a failed lookup.
        for images in [&["arm:1"][..], &["arm:1", "both:1"][..]] {
            let p = pod(images);
            let decision = decide(&plan(&p, &ignore), &lookups, &arm, &ignore);
            let Verdict::Deny {
                reason, message, ..
            } = &decision.verdict
            else {
                panic!("{images:?}: {:?}", decision.verdict);
            };
            assert_eq!(*reason, DenyReason::NoCommonArch, "{images:?}");
            assert!(
                message.contains(&format!(
                    "arm:1 [] (not used: linux/arm64 proven false (verification: {evidence}))"
                )),
                "{message}"
            );
        }

        // No correction: the decision is what it was.
        let p = pod(&["both:1"]);
        let plain = decide(&plan(&p, &ignore), &lookups, &Facts::default(), &ignore);
        let unrelated = decide(&plan(&p, &ignore), &lookups, &arm, &ignore);
        assert_eq!(plain, unrelated);
        assert!(plain.warnings.is_empty());
    }
}
