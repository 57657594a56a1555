//! Finding a path in an image's layers, read once each from the top layer down (the layers an
//! overlay filesystem would stack), without keeping their contents: each layer's entries are
//! remembered as hashes (a 32-bit one for directories and plain files, a 64-bit one with the
//! few facts that matter for links, whiteouts and executables), so a link found in a lower
//! layer that points back up is resolved without reading any layer twice.
//!
//! The merged view, as overlayfs and the OCI image spec define it: the topmost layer with an
//! entry at a path decides; a whiteout `.wh.NAME` hides `NAME` in the layers below it, an
//! opaque marker `.wh..wh..opq` hides a directory's lower contents; symlinks are followed in
//! the merged view (absolute targets from the image root, relative ones from the link's
//! directory), hard links within their own layer and below it (a layer may link to a file a
//! lower layer holds); at most [`MAX_HOPS`] links, as Linux's `ELOOP`. Within one layer the
//! first entry of a path decides (image layers hold each path once). A directory a layer
//! implies only by its entries' paths is not an entry of its own.
//!
//! Keys are hashed with a key drawn at random per search, so no layer can be written to make
//! two paths collide; a 32-bit collision between two plain entries (about 1 in 2^31 per look)
//! can only make a path look present: an `unverifiable` verdict, never a mismatch.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use super::elf::Machine;
use super::path::{self, TooLong};
use super::program::Shebang;
use super::tar::{Entry, Kind};

/// Links followed for one path (Linux's `MAXSYMLINKS`).
pub const MAX_HOPS: u32 = 40;
/// Tar entries read in all the layers of one verification.
pub const MAX_ENTRIES: u64 = 200_000;
/// Links, whiteouts and executables remembered.
pub const MAX_RECORDS: usize = 32_768;
/// Bytes of link targets and `#!` lines remembered.
pub const MAX_TEXT: usize = 256 * 1024;

/// What a layer holds at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Dir,
    /// A file that is no executable ELF or script (data, a JAR, a device, a FIFO).
    File,
    /// An executable ELF file (its identification packed).
    Elf(u32),
    /// An executable `#!` script (its line, in the text store).
    Script(u32),
    Symlink(u32),
    Hardlink(u32),
    Whiteout,
    Opaque,
}

/// Why the search cannot go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhausted {
    /// More than [`MAX_ENTRIES`] entries.
    Entries,
    /// More than [`MAX_RECORDS`] records or [`MAX_TEXT`] bytes of text.
    Records,
    /// A path or link target longer than the bound.
    PathLength,
}

/// The key domains: an entry, the path a whiteout hides, a directory made opaque.
#[derive(Clone, Copy, Hash)]
enum Domain {
    Entry,
    Whiteout,
    Opaque,
}

#[derive(Debug, Default)]
struct Layer {
    /// `(hash >> 33) << 1 | is_dir` of directories and plain files.
    plain: Vec<u32>,
    /// 64-bit hash and node of links, whiteouts, opaque markers and executables.
    rich: Vec<(u64, Node)>,
    /// Read to its end (then both lists are sorted).
    complete: bool,
}

impl Layer {
    fn rich(&self, key: u64) -> Option<Node> {
        if self.complete {
            let at = self.rich.partition_point(|(k, _)| *k < key);
            self.rich
                .get(at)
                .filter(|(k, _)| *k == key)
                .map(|(_, node)| *node)
        } else {
            self.rich.iter().find(|(k, _)| *k == key).map(|(_, n)| *n)
        }
    }

    fn plain(&self, key: u64) -> Option<Node> {
        let short = plain_key(key, false);
        let to_node = |word: u32| if word & 1 == 1 { Node::Dir } else { Node::File };
        if self.complete {
            let at = self.plain.partition_point(|w| *w < short);
            self.plain
                .get(at)
                .filter(|w| *w >> 1 == short >> 1)
                .map(|w| to_node(*w))
        } else {
            self.plain
                .iter()
                .find(|w| *w >> 1 == short >> 1)
                .map(|w| to_node(*w))
        }
    }

    fn bytes(&self) -> usize {
        self.plain
            .capacity()
            .saturating_mul(4)
            .saturating_add(self.rich.capacity().saturating_mul(16))
    }
}

fn plain_key(key: u64, dir: bool) -> u32 {
    (((key >> 33) as u32) << 1) | u32::from(dir)
}

/// One path looked for: from layer `floor` down (a hard link's target is in its own layer or
/// below), after `hops` links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Want {
    pub path: String,
    pub floor: usize,
    pub hops: u32,
}

impl Want {
    pub fn new(path: String) -> Self {
        Self {
            path,
            floor: 0,
            hops: 0,
        }
    }
}

/// Where a want stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// A file at `path` (the want's path with every link followed).
    Found {
        path: String,
        node: Node,
    },
    /// Nothing there (absent, hidden by a whiteout, a directory, under a file), or a loop.
    Missing,
    /// Undecided until an entry at `waiting` appears, or its layer ends.
    Pending {
        waiting: String,
    },
    Exhausted(Exhausted),
}

enum Opinion {
    Node(usize, Node),
    Absent,
    Pending,
}

/// The layers read so far, remembered.
#[derive(Debug)]
pub(crate) struct Search {
    hasher: RandomState,
    layers: Vec<Layer>,
    /// How many layers the image has.
    total: usize,
    text: String,
    spans: Vec<(u32, u32)>,
    entries: u64,
    records: usize,
    /// The directory of the previous entry of the current layer: its ancestors are recorded.
    last_parent: String,
}

impl Search {
    pub fn new(total: usize) -> Self {
        Self {
            hasher: RandomState::new(),
            layers: Vec::new(),
            total,
            text: String::new(),
            spans: Vec::new(),
            entries: 0,
            records: 0,
            last_parent: String::new(),
        }
    }

    /// Layers begun so far.
    pub fn layers_read(&self) -> usize {
        self.layers.len()
    }

    /// Bytes held by the remembered layers.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(Layer::bytes)
            .fold(0usize, usize::saturating_add)
            .saturating_add(self.text.capacity())
            .saturating_add(self.spans.capacity().saturating_mul(8))
    }

    pub fn begin_layer(&mut self) {
        self.layers.push(Layer::default());
        self.last_parent.clear();
    }

    pub fn end_layer(&mut self) {
        if let Some(layer) = self.layers.last_mut() {
            layer.plain.sort_unstable();
            // Stable: the first entry of a path stays first among equal keys.
            layer.rich.sort_by_key(|(k, _)| *k);
            layer.plain.shrink_to_fit();
            layer.rich.shrink_to_fit();
            layer.complete = true;
        }
    }

    fn key(&self, domain: Domain, path: &str) -> u64 {
        self.hasher.hash_one((domain, path))
    }

    /// Remembers `entry` of the current layer: a whiteout as the path it hides, an opaque
    /// marker as its directory, an executable file by its first bytes (ELF or `#!`).
    pub fn record(&mut self, entry: &Entry<'_>) -> Result<(), Exhausted> {
        self.count()?;
        self.implied(path::parent(entry.path))?;
        let name = path::file_name(entry.path);
        if let Some(hidden) = name.strip_prefix(".wh.") {
            let parent = path::parent(entry.path);
            if hidden == ".wh..opq" {
                let key = self.key(Domain::Opaque, parent);
                return self.rich(key, Node::Opaque);
            }
            let hidden = path::join(parent, hidden).map_err(|TooLong| Exhausted::PathLength)?;
            let key = self.key(Domain::Whiteout, &hidden);
            return self.rich(key, Node::Whiteout);
        }
        let key = self.key(Domain::Entry, entry.path);
        let executable = entry.mode & 0o111 != 0;
        let node = match entry.kind {
            Kind::Dir => {
                self.plain(key, true)?;
                // Its children need not record it again.
                entry.path.clone_into(&mut self.last_parent);
                return Ok(());
            }
            Kind::Other => return self.plain(key, false),
            Kind::Symlink => Node::Symlink(self.store(entry.link)?),
            Kind::Hardlink => Node::Hardlink(self.store(entry.link)?),
            Kind::File if executable => {
                if let Some(machine) = Machine::parse(entry.head) {
                    Node::Elf(machine.pack())
                } else if let Some(shebang) = Shebang::parse(entry.head) {
                    Node::Script(self.store(&shebang.to_line())?)
                } else {
                    return self.plain(key, false);
                }
            }
            Kind::File => return self.plain(key, false),
        };
        self.rich(key, node)
    }

    fn count(&mut self) -> Result<(), Exhausted> {
        self.entries = self.entries.saturating_add(1);
        if self.entries > MAX_ENTRIES {
            return Err(Exhausted::Entries);
        }
        Ok(())
    }

    /// Records `dir` and the directories above it as directories of the current layer (a
    /// layer's entries imply their directories, as extracting it creates them), unless the
    /// previous entry's did.
    fn implied(&mut self, dir: &str) -> Result<(), Exhausted> {
        if dir == self.last_parent {
            return Ok(());
        }
        let mut current = dir;
        while current != "/" && !path::is_prefix_or_equal(current, &self.last_parent) {
            self.count()?;
            let key = self.key(Domain::Entry, current);
            self.plain(key, true)?;
            current = path::parent(current);
        }
        dir.clone_into(&mut self.last_parent);
        Ok(())
    }

    fn plain(&mut self, key: u64, dir: bool) -> Result<(), Exhausted> {
        if let Some(layer) = self.layers.last_mut() {
            layer.plain.push(plain_key(key, dir));
        }
        Ok(())
    }

    fn rich(&mut self, key: u64, node: Node) -> Result<(), Exhausted> {
        self.records = self.records.saturating_add(1);
        if self.records > MAX_RECORDS {
            return Err(Exhausted::Records);
        }
        if let Some(layer) = self.layers.last_mut() {
            layer.rich.push((key, node));
        }
        Ok(())
    }

    fn store(&mut self, text: &str) -> Result<u32, Exhausted> {
        if self.text.len().saturating_add(text.len()) > MAX_TEXT {
            return Err(Exhausted::Records);
        }
        let start = u32::try_from(self.text.len()).map_err(|_| Exhausted::Records)?;
        let len = u32::try_from(text.len()).map_err(|_| Exhausted::Records)?;
        let index = u32::try_from(self.spans.len()).map_err(|_| Exhausted::Records)?;
        self.text.push_str(text);
        self.spans.push((start, len));
        Ok(index)
    }

    /// A stored link target or `#!` line.
    pub fn text(&self, index: u32) -> &str {
        let Some(&(start, len)) = self.spans.get(index as usize) else {
            return "";
        };
        let (start, len) = (start as usize, len as usize);
        self.text
            .get(start..start.saturating_add(len))
            .unwrap_or_default()
    }

    /// Whether an entry at `entry_path` of the current layer may decide a want waiting on
    /// `waiting`: at that path or under it, a whiteout hiding it or one of its directories, or
    /// an opaque marker on one of its directories.
    pub fn concerns(entry_path: &str, waiting: &str) -> bool {
        let name = path::file_name(entry_path);
        match name.strip_prefix(".wh.") {
            Some(".wh..opq") => {
                let dir = path::parent(entry_path);
                path::is_prefix_or_equal(dir, waiting) && dir != waiting
            }
            Some(hidden) => path::join(path::parent(entry_path), hidden)
                .is_ok_and(|h| path::is_prefix_or_equal(&h, waiting)),
            // At the path, or under it (a directory the entry implies).
            None => path::is_prefix_or_equal(waiting, entry_path),
        }
    }

    /// Where `want` stands given the layers read so far.
    pub fn resolve(&self, want: &Want) -> Probe {
        let mut path = want.path.clone();
        let mut floor = want.floor;
        let mut hops = want.hops;
        'walk: loop {
            let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
            let mut prefix = String::new();
            for (i, component) in components.iter().enumerate() {
                let parent = if prefix.is_empty() { "/" } else { &prefix };
                let here = format!("{prefix}/{component}");
                let last = i + 1 == components.len();
                let (layer, node) = match self.opinion(&here, floor) {
                    Opinion::Pending => return Probe::Pending { waiting: here },
                    Opinion::Absent => return Probe::Missing,
                    Opinion::Node(layer, node) => (layer, node),
                };
                match node {
                    Node::Dir if !last => prefix = here,
                    Node::Symlink(target) => {
                        hops += 1;
                        if hops > MAX_HOPS {
                            return Probe::Missing;
                        }
                        let rest = components[i + 1..].join("/");
                        let next = path::normalize(parent, self.text(target))
                            .and_then(|target| path::normalize(&target, &rest));
                        let Ok(next) = next else {
                            return Probe::Exhausted(Exhausted::PathLength);
                        };
                        path = next;
                        floor = 0;
                        continue 'walk;
                    }
                    Node::Hardlink(target) if last => {
                        hops += 1;
                        if hops > MAX_HOPS {
                            return Probe::Missing;
                        }
                        let Ok(next) = path::normalize("/", self.text(target)) else {
                            return Probe::Exhausted(Exhausted::PathLength);
                        };
                        path = next;
                        floor = layer;
                        continue 'walk;
                    }
                    Node::File | Node::Elf(_) | Node::Script(_) if last => {
                        return Probe::Found { path: here, node };
                    }
                    // A directory is no program; nothing lies under a file.
                    _ => return Probe::Missing,
                }
            }
            // The root itself.
            return Probe::Missing;
        }
    }

    /// The topmost opinion on `path` in the layers from `floor` down.
    fn opinion(&self, path: &str, floor: usize) -> Opinion {
        let entry = self.key(Domain::Entry, path);
        // What hides `path` in the layers below the one holding it: a whiteout of the path or
        // of a directory above it, an opaque marker on a directory above it.
        let mut hiding = vec![self.key(Domain::Whiteout, path)];
        for dir in ancestors(path) {
            hiding.push(self.key(Domain::Opaque, dir));
            if dir != "/" {
                hiding.push(self.key(Domain::Whiteout, dir));
            }
        }
        for (index, layer) in self.layers.iter().enumerate().skip(floor) {
            if let Some(node) = layer.rich(entry).or_else(|| layer.plain(entry)) {
                return Opinion::Node(index, node);
            }
            if hiding.iter().any(|&key| layer.rich(key).is_some()) {
                return Opinion::Absent;
            }
            if !layer.complete {
                return Opinion::Pending;
            }
        }
        if self.layers.len() < self.total {
            Opinion::Pending
        } else {
            Opinion::Absent
        }
    }
}

/// The directories above a normalized path, the root included.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut end = Some(path.len());
    std::iter::from_fn(move || {
        let current = end?;
        let at = path[..current].rfind('/')?;
        end = (at > 0).then_some(at);
        Some(if at == 0 { "/" } else { &path[..at] })
    })
}

#[cfg(test)]
#[path = "search/tests.rs"]
mod tests;
