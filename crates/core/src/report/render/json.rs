//! The JSON rendering (the `report.noe.adevinta.com/v1` `ReadinessReport` contract), streamed:
//! each part of the report is serialized straight from the report's own structures into the
//! writer, item by item, so no tree of the whole document and no string of it is ever held
//! (a report of many thousand workloads would otherwise hold both at once).
//!
//! Object keys are written in lexicographic order, nested objects included, as the document
//! has always had them: its bytes do not depend on how it is produced.

use std::collections::BTreeMap;
use std::io::Write;

use serde::ser::{SerializeMap as _, SerializeSeq as _};
use serde::{Serialize, Serializer};

use super::super::{ArchSummary, Blocker, ImageEntry, Item, Report, Requests, Tally};
use crate::upgrade::Upgrade;

impl Report {
    /// Writes the `ReadinessReport` (docs/configuration.md, "noe report") to `out`, indented
    /// and followed by a newline, part by part (`out` is best a `BufWriter`).
    pub fn write_json<W: Write>(&self, mut out: W) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut out, &Document(self)).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    /// The `ReadinessReport` as a JSON tree, serialized from the same structures as
    /// [`Report::write_json`] streams (the tests hold the stream against it).
    #[cfg(test)]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::to_value(Document(self)).unwrap_or_default()
    }
}

struct Document<'a>(&'a Report);

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let report = self.0;
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("apiVersion", super::super::API_VERSION)?;
        map.serialize_entry("errors", &Errors(report))?;
        map.serialize_entry(
            "items",
            &Seq(report.items.iter().map(|item| ItemJson {
                item,
                include_pods: report.include_pods,
                upgrades: report.upgrades,
            })),
        )?;
        map.serialize_entry("kind", super::super::KIND)?;
        map.serialize_entry("summary", &Keyed(&report.summary, Summary))?;
        map.serialize_entry("targetArchs", &report.targets)?;
        map.end()
    }
}

/// A sequence serialized from an iterator that can be walked again.
struct Seq<I>(I);

impl<I> Serialize for Seq<I>
where
    I: Iterator + Clone,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let iter = self.0.clone();
        let mut seq = serializer.serialize_seq(iter.size_hint().1)?;
        for element in iter {
            seq.serialize_element(&element)?;
        }
        seq.end()
    }
}

/// `(key, value)` pairs as an object, keys sorted and a repeated key written once (its last
/// value), each value rendered by the function.
struct Keyed<'a, V, R>(&'a [(String, V)], fn(&'a V) -> R);

impl<V, R: Serialize> Serialize for Keyed<'_, V, R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let sorted: BTreeMap<&str, &V> = self.0.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut map = serializer.serialize_map(Some(sorted.len()))?;
        for (key, value) in sorted {
            map.serialize_entry(key, &(self.1)(value))?;
        }
        map.end()
    }
}

/// A value written with its `Display` form as a JSON string.
struct Shown<T>(T);

impl<T: std::fmt::Display> Serialize for Shown<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

struct RequestsJson<'a>(&'a Requests);

impl Serialize for RequestsJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("cpu", &Shown(self.0.cpu))?;
        map.serialize_entry("memory", &Shown(self.0.memory))?;
        map.end()
    }
}

struct ErrorJson<'a> {
    kind: &'a str,
    message: &'a str,
}

impl Serialize for ErrorJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("kind", self.kind)?;
        map.serialize_entry("message", self.message)?;
        map.end()
    }
}

struct ImageJson<'a>(&'a ImageEntry);

impl Serialize for ImageJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entry = self.0;
        let fields =
            3 + usize::from(!entry.corrections.is_empty()) + usize::from(!entry.learned.is_empty());
        let mut map = serializer.serialize_map(Some(fields))?;
        match &entry.answer {
            Ok(platforms) => {
                map.serialize_entry("error", &())?;
                map.serialize_entry("image", &entry.image)?;
                map.serialize_entry("platforms", &Seq(platforms.iter().map(Shown)))?;
            }
            Err(failure) => {
                map.serialize_entry(
                    "error",
                    &ErrorJson {
                        kind: &failure.kind,
                        message: &failure.message,
                    },
                )?;
                map.serialize_entry("image", &entry.image)?;
                map.serialize_entry("platforms", &())?;
            }
        }
        if !entry.learned.is_empty() {
            map.serialize_entry("learned", &Seq(entry.learned.iter().map(CorrectionJson)))?;
        }
        if !entry.corrections.is_empty() {
            map.serialize_entry(
                "corrections",
                &Seq(entry.corrections.iter().map(CorrectionJson)),
            )?;
        }
        map.end()
    }
}

/// A platform proven false for the image, left out of its platforms:
/// `{"evidence","platform","source"}`.
struct CorrectionJson<'a>(&'a crate::truth::Correction);

impl Serialize for CorrectionJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let correction = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("evidence", &correction.evidence)?;
        map.serialize_entry("platform", &Shown(&correction.platform))?;
        map.serialize_entry("source", correction.source.as_str())?;
        map.end()
    }
}

struct ItemJson<'a> {
    item: &'a Item,
    include_pods: bool,
    upgrades: bool,
}

impl Serialize for ItemJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Self {
            item,
            include_pods,
            upgrades,
        } = *self;
        let w = &item.workload;
        let fields = 10 + usize::from(include_pods) + usize::from(upgrades);
        let mut map = serializer.serialize_map(Some(fields))?;
        map.serialize_entry("blocking", &Keyed(&item.blocking, |images| images))?;
        map.serialize_entry("images", &Seq(item.images.iter().map(ImageJson)))?;
        map.serialize_entry("kind", &w.kind)?;
        map.serialize_entry("name", &w.name)?;
        map.serialize_entry("namespace", &w.namespace)?;
        map.serialize_entry("platforms", &item.common)?;
        map.serialize_entry("replicas", &w.replicas)?;
        map.serialize_entry("requests", &RequestsJson(&w.requests))?;
        if include_pods {
            let empty = BTreeMap::new();
            map.serialize_entry("runningOn", item.running_on.as_ref().unwrap_or(&empty))?;
        }
        map.serialize_entry("totalRequests", &item.total.as_ref().map(RequestsJson))?;
        if upgrades {
            // Every target architecture, blocked or not (an empty list).
            let per_arch: Vec<(String, &[std::sync::Arc<Upgrade>])> = item
                .verdicts
                .iter()
                .map(|(arch, _)| (arch.clone(), item.upgrades(arch)))
                .collect();
            map.serialize_entry(
                "upgrades",
                &Keyed(&per_arch, |upgrades| Seq(upgrades.iter().map(|u| &**u))),
            )?;
        }
        map.serialize_entry(
            "verdicts",
            &Keyed(&item.verdicts, |verdict| verdict.as_str()),
        )?;
        map.end()
    }
}

struct CountsJson<'a>(&'a super::super::Counts);

impl Serialize for CountsJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let counts = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("blocked", &counts.blocked)?;
        map.serialize_entry("ready", &counts.ready)?;
        map.serialize_entry("unknown", &counts.unknown)?;
        map.end()
    }
}

struct ByVerdictJson<'a>(&'a super::super::RequestsByVerdict);

impl Serialize for ByVerdictJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let requests = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("blocked", &RequestsJson(&requests.blocked))?;
        map.serialize_entry("ready", &RequestsJson(&requests.ready))?;
        map.serialize_entry("unknown", &RequestsJson(&requests.unknown))?;
        map.end()
    }
}

struct TallyJson<'a>(&'a Tally);

impl Serialize for TallyJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tally = self.0;
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("movable", &RequestsJson(&tally.movable))?;
        map.serialize_entry("replicas", &CountsJson(&tally.replicas))?;
        map.serialize_entry("requests", &ByVerdictJson(&tally.requests))?;
        map.serialize_entry("workloads", &CountsJson(&tally.workloads))?;
        map.end()
    }
}

struct BlockerJson<'a>(&'a Blocker);

impl Serialize for BlockerJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let blocker = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("image", &blocker.image)?;
        map.serialize_entry("replicas", &blocker.replicas)?;
        map.serialize_entry("requests", &RequestsJson(&blocker.requests))?;
        if let Some(upgrade) = &blocker.upgrade {
            map.serialize_entry("upgrade", &**upgrade)?;
        }
        map.serialize_entry("workloads", &blocker.workloads)?;
        map.end()
    }
}

struct Summary<'a>(&'a ArchSummary);

impl Serialize for Summary<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Namespaces<'a>(&'a BTreeMap<String, Tally>);
        impl Serialize for Namespaces<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().map(|(ns, tally)| (ns, TallyJson(tally))))
            }
        }
        let summary = self.0;
        let all = &summary.all;
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry(
            "blockingImages",
            &Seq(summary.blocking_images.iter().map(BlockerJson)),
        )?;
        map.serialize_entry("movable", &RequestsJson(&all.movable))?;
        map.serialize_entry("namespaces", &Namespaces(&summary.namespaces))?;
        map.serialize_entry("replicas", &CountsJson(&all.replicas))?;
        map.serialize_entry("requests", &ByVerdictJson(&all.requests))?;
        map.serialize_entry("workloads", &CountsJson(&all.workloads))?;
        map.end()
    }
}

struct Errors<'a>(&'a Report);

impl Serialize for Errors<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct ImageError<'a>(&'a super::super::ImageError);
        impl Serialize for ImageError<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let e = self.0;
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry(
                    "error",
                    &ErrorJson {
                        kind: &e.failure.kind,
                        message: &e.failure.message,
                    },
                )?;
                map.serialize_entry("image", &e.image)?;
                map.serialize_entry("workloads", &e.workloads)?;
                map.end()
            }
        }
        struct SourceError<'a>(&'a super::super::SourceError);
        impl Serialize for SourceError<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("message", &self.0.message)?;
                map.serialize_entry("source", &self.0.source)?;
                map.end()
            }
        }
        let report = self.0;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("images", &Seq(report.image_errors.iter().map(ImageError)))?;
        map.serialize_entry(
            "sources",
            &Seq(report.source_errors.iter().map(SourceError)),
        )?;
        map.end()
    }
}
