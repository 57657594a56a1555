//! The decision memo's key: the pod as the decision reads it, less what differs between the pods
//! of one template, found by one scan of the bytes sent (no value is built).
//!
//! The apiserver gives every pod of a ReplicaSet, Job or DaemonSet, before any webhook sees it,
//! a name of its own (`generateName` and five random characters), a `uid`, a
//! `creationTimestamp`, field-manager entries whose `time` is the second it was created, and
//! (the service account admission plugin) a token volume named `kube-api-access-` and five random
//! characters, mounted in each container. No step of the decision reads any of them
//! (`admission/prune.rs` leaves out the status, the field-manager entries, every member of a
//! container but its name and image and every member of a volume but its name and image; the
//! decision reads no name, uid, creation time or volume name), and the patch is written from
//! what it reads. So the key is taken over a text derived
//! from the object's bytes as sent: the members [`super::super::prune`] leaves out are cut out
//! of it, and the string values of `metadata.name` (when the apiserver generated it from
//! `generateName`), `metadata.uid`, `metadata.creationTimestamp` and `spec.volumes[].name` are
//! replaced by `""`. Everything else stays byte for byte, so two pods with one key have the same
//! pruned object but for those values: the same decision, and the same answer.
//!
//! The text is never built: its pieces (ranges of the body, and the `""`s) are fed to the keyed
//! hash as they are found. Cutting whole members and replacing whole string tokens keeps it a
//! sequence of the body's own tokens in which a member left out is an empty slot between commas,
//! so two different pruned objects never give the same text. A member whose name is escaped
//! (`"st\u0061tus"`) is kept whole (more is kept, never less); a value that is not a string is
//! kept whole (the checks of `admission/review.rs` see the same types); an object that does not
//! scan (not reached: the envelope checked it is JSON) is keyed by all of its bytes.

use std::hash::{Hash, Hasher};

/// The longest prefix of `generateName` a generated name keeps (Kubernetes'
/// `maxGeneratedNameLength`: 63 less the 5 random characters).
const GENERATED_PREFIX: usize = 58;
/// Random characters the apiserver appends to `generateName`.
const GENERATED_SUFFIX: usize = 5;
/// What a replaced string value is written as.
const BLANK: &[u8] = b"\"\"";
/// Written before the whole object when it does not scan: a byte no UTF-8 text holds.
const UNSCANNED: &[u8] = &[0xff];

/// A pod creation's object in its namespace, hashed as the memo key.
pub struct PodKey<'a> {
    pub namespace: &'a str,
    /// `request.object` as sent.
    pub object: &'a str,
}

impl Hash for PodKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        "decision".hash(state);
        self.namespace.hash(state);
        let bytes = self.object.as_bytes();
        let mut text = Text {
            bytes,
            state,
            pending: None,
        };
        let scanned = Scanner { bytes, at: 0 }.pod(&mut text);
        text.flush();
        if scanned.is_none() {
            state.write(UNSCANNED);
            state.write(bytes);
        }
    }
}

/// The derived text, fed to the hash: adjacent ranges of the body are joined first, so a pod
/// whose members are all kept is hashed in one write.
struct Text<'a, 'h, H: Hasher> {
    bytes: &'a [u8],
    state: &'h mut H,
    pending: Option<(usize, usize)>,
}

impl<H: Hasher> Text<'_, '_, H> {
    fn range(&mut self, start: usize, end: usize) {
        match &mut self.pending {
            Some((_, pending_end)) if *pending_end == start => *pending_end = end,
            _ => {
                self.flush();
                self.pending = Some((start, end));
            }
        }
    }

    fn literal(&mut self, bytes: &[u8]) {
        self.flush();
        self.state.write(bytes);
    }

    fn flush(&mut self) {
        if let Some((start, end)) = self.pending.take() {
            self.state
                .write(self.bytes.get(start..end).unwrap_or_default());
        }
    }
}

/// Where a member stands: what is cut out of it, replaced, or read further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Pod,
    Metadata,
    Spec,
    /// One container of `containers`, `initContainers` or `ephemeralContainers`.
    Container,
    /// One entry of `spec.volumes`.
    Volume,
}

/// What becomes of a member's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    /// Kept byte for byte.
    Kept,
    /// Cut out with its name.
    Cut,
    /// A string value written as `""`.
    Blank,
    /// `metadata.name`: written as `""`, and after `metadata` whole unless it was generated.
    Name,
    /// An object read at this level.
    Object(Level),
    /// An array of objects read at this level.
    Objects(Level),
}

fn member(level: Level, key: &[u8]) -> Member {
    match (level, key) {
        (Level::Pod, b"status") => Member::Cut,
        (Level::Pod, b"metadata") => Member::Object(Level::Metadata),
        (Level::Pod, b"spec") => Member::Object(Level::Spec),
        (Level::Metadata, b"managedFields") => Member::Cut,
        (Level::Metadata, b"name") => Member::Name,
        (Level::Metadata, b"uid" | b"creationTimestamp") => Member::Blank,
        (Level::Spec, b"containers" | b"initContainers" | b"ephemeralContainers") => {
            Member::Objects(Level::Container)
        }
        (Level::Spec, b"volumes") => Member::Objects(Level::Volume),
        (Level::Container, b"name" | b"image") => Member::Kept,
        (Level::Container, _) => Member::Cut,
        (Level::Volume, b"name") => Member::Blank,
        (Level::Volume, b"image") => Member::Kept,
        (Level::Volume, _) => Member::Cut,
        _ => Member::Kept,
    }
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string token from its opening quote: its range, quotes included.
    fn string(&mut self) -> Option<(usize, usize)> {
        let start = self.at;
        (self.peek()? == b'"').then_some(())?;
        let mut at = start + 1;
        loop {
            let found = memchr::memchr2(b'"', b'\\', self.bytes.get(at..)?)?;
            at += found;
            if self.bytes.get(at)? == &b'\\' {
                at += 2;
                continue;
            }
            self.at = at + 1;
            return Some((start, self.at));
        }
    }

    /// Any value: its range.
    fn value(&mut self) -> Option<(usize, usize)> {
        self.space();
        let start = self.at;
        match self.peek()? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.checked_sub(1)?;
                            if depth == 0 {
                                self.at += 1;
                                return Some((start, self.at));
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                ) {
                    self.at += 1;
                }
                (self.at > start).then_some((start, self.at))
            }
        }
    }

    /// The whole object: `None` when it does not scan.
    fn pod<H: Hasher>(&mut self, text: &mut Text<'_, '_, H>) -> Option<()> {
        self.space();
        if self.peek()? == b'{' {
            self.object(Level::Pod, text)?;
        } else {
            let (start, end) = self.value()?;
            text.range(start, end);
        }
        self.space();
        (self.at == self.bytes.len()).then_some(())
    }

    /// An object at `level`, from its opening brace.
    fn object<H: Hasher>(&mut self, level: Level, text: &mut Text<'_, '_, H>) -> Option<()> {
        let open = self.at;
        self.expect(b'{')?;
        text.range(open, self.at);
        // `metadata`: the name's range, and `generateName`'s.
        let mut name = None;
        let mut generate_name = None;
        loop {
            self.space();
            let start = self.at;
            match self.peek()? {
                b'}' => {
                    self.at += 1;
                    text.range(start, self.at);
                    if let Some(name) =
                        name.filter(|name| !generated(self.bytes, *name, generate_name))
                    {
                        text.range(name.0, name.1);
                    }
                    return Some(());
                }
                b',' => {
                    self.at += 1;
                    text.range(start, self.at);
                    continue;
                }
                _ => {}
            }
            let key = self.string()?;
            self.expect(b':')?;
            self.space();
            let key_text = self.bytes.get(key.0 + 1..key.1 - 1)?;
            let is_string = self.peek()? == b'"';
            match member(level, key_text) {
                Member::Cut => {
                    self.value()?;
                }
                Member::Blank | Member::Name if is_string => {
                    text.range(start, self.at);
                    let value = self.value()?;
                    text.literal(BLANK);
                    if member(level, key_text) == Member::Name {
                        name = Some(value);
                    }
                }
                Member::Object(child) if self.peek()? == b'{' => {
                    text.range(start, self.at);
                    self.object(child, text)?;
                }
                Member::Objects(child) if self.peek()? == b'[' => {
                    text.range(start, self.at);
                    self.objects(child, text)?;
                }
                _ => {
                    let (_, end) = self.value()?;
                    if level == Level::Metadata && key_text == b"generateName" {
                        generate_name = Some((key.1, end));
                    }
                    text.range(start, end);
                }
            }
        }
    }

    /// An array whose objects are read at `level` (anything else in it kept), from its bracket.
    fn objects<H: Hasher>(&mut self, level: Level, text: &mut Text<'_, '_, H>) -> Option<()> {
        let open = self.at;
        self.expect(b'[')?;
        text.range(open, self.at);
        loop {
            self.space();
            let start = self.at;
            match self.peek()? {
                b']' | b',' => {
                    let close = self.peek()? == b']';
                    self.at += 1;
                    text.range(start, self.at);
                    if close {
                        return Some(());
                    }
                }
                b'{' => self.object(level, text)?,
                _ => {
                    let (start, end) = self.value()?;
                    text.range(start, end);
                }
            }
        }
    }
}

/// Whether the name at `name` (a string token's range) is one the apiserver generated from the
/// `generateName` whose value's range (from after the member name, colon and spaces included)
/// is `generate_name`: its first 58 characters and 5 more. Escaped strings are never taken as
/// generated.
fn generated(bytes: &[u8], name: (usize, usize), generate_name: Option<(usize, usize)>) -> bool {
    let inner = |(start, end): (usize, usize)| {
        let token = bytes.get(start..end)?.trim_ascii();
        let token = token.strip_prefix(b":")?.trim_ascii();
        let text = token.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        (!text.contains(&b'\\')).then_some(text)
    };
    let Some(name) = bytes
        .get(name.0 + 1..name.1.saturating_sub(1))
        .filter(|text| !text.contains(&b'\\'))
    else {
        return false;
    };
    let Some(prefix) = generate_name.and_then(inner) else {
        return false;
    };
    let prefix = prefix.get(..GENERATED_PREFIX).unwrap_or(prefix);
    name.len() == prefix.len() + GENERATED_SUFFIX && name.starts_with(prefix)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "key/tests.rs"]
mod tests;
