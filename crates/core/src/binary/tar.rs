//! A streamed tar reader that holds no more than one header, one long name or PAX record set
//! (bounded) and the first bytes of the current file: bytes are pushed in as they arrive, each
//! entry is handed out with its first [`HEAD_LEN`] bytes, and the rest of its data is skipped.
//! Reads ustar, GNU (long names `L`, long links `K`, base-256 sizes) and PAX (`path`,
//! `linkpath`, `size`) headers, as image layers carry them. Nothing is written anywhere.
//!
//! Hand-written rather than the `tar` crate's reader: that one reads a GNU long name or a PAX
//! header whole into memory whatever size its header states, which a hostile layer would turn
//! into memory; here names stop at [`MAX_PATH_LEN`] and PAX headers at [`MAX_PAX_LEN`].

use std::fmt;
use std::ops::ControlFlow;

use super::path::{self, MAX_PATH_LEN};

const BLOCK: usize = 512;

/// Bytes of each regular file handed out with its entry (enough for an ELF header and a `#!`
/// line as the kernel reads it).
pub const HEAD_LEN: usize = 256;

/// Largest PAX extended header read; a larger one fails the layer.
pub const MAX_PAX_LEN: usize = 64 * 1024;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Hardlink,
    Symlink,
    Dir,
    /// Devices, FIFOs, sparse files and entry types this reader does not know.
    Other,
}

/// One entry, borrowed from the reader for the time of the callback.
#[derive(Debug)]
pub struct Entry<'a> {
    /// Absolute and normalized (`/usr/bin/sh`); `/` for the root.
    pub path: &'a str,
    pub kind: Kind,
    /// A link's target as written (relative or absolute), else empty.
    pub link: &'a str,
    /// Permission bits.
    pub mode: u32,
    /// The first bytes of a regular file (at most [`HEAD_LEN`]), else empty.
    pub head: &'a [u8],
}

/// Why a layer cannot be read as tar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TarError {
    /// A header or extended header that is not tar's.
    Malformed(&'static str),
    /// A name or link target longer than [`MAX_PATH_LEN`].
    TooLong,
    /// A PAX header larger than [`MAX_PAX_LEN`].
    PaxTooLarge,
    /// The data ended inside an entry.
    Truncated,
}

impl fmt::Display for TarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(what) => write!(f, "not a tar layer: {what}"),
            Self::TooLong => write!(f, "a name longer than {MAX_PATH_LEN} bytes"),
            Self::PaxTooLarge => write!(f, "a PAX header larger than {MAX_PAX_LEN} bytes"),
            Self::Truncated => f.write_str("the layer ends inside an entry"),
        }
    }
}

impl std::error::Error for TarError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Meta {
    LongName,
    LongLink,
    Pax,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Filling the next 512-byte header.
    Header,
    /// Buffering an extended header's data.
    Meta { meta: Meta, left: u64, padding: u64 },
    /// Buffering the first bytes of a regular file.
    Head { want: usize, rest: u64 },
    /// Skipping data and padding.
    Skip { left: u64 },
    /// After the end-of-archive block.
    End,
}

/// The streamed reader. Feed it with [`TarReader::push`], then call [`TarReader::finish`].
#[derive(Debug)]
pub struct TarReader {
    state: State,
    block: Vec<u8>,
    meta: Vec<u8>,
    long_name: Option<String>,
    long_link: Option<String>,
    pax_path: Option<String>,
    pax_link: Option<String>,
    pax_size: Option<u64>,
    path: String,
    link: String,
    kind: Kind,
    mode: u32,
    head: Vec<u8>,
    entries: u64,
}

impl Default for TarReader {
    fn default() -> Self {
        Self::new()
    }
}

impl TarReader {
    pub fn new() -> Self {
        Self {
            state: State::Header,
            block: Vec::with_capacity(BLOCK),
            meta: Vec::new(),
            long_name: None,
            long_link: None,
            pax_path: None,
            pax_link: None,
            pax_size: None,
            path: String::new(),
            link: String::new(),
            kind: Kind::Other,
            mode: 0,
            head: Vec::with_capacity(HEAD_LEN),
            entries: 0,
        }
    }

    /// Headers read so far (extended headers included).
    pub fn headers(&self) -> u64 {
        self.entries
    }

    /// Whether the end-of-archive block was read.
    pub fn ended(&self) -> bool {
        self.state == State::End
    }

    /// Bytes the reader holds in buffers now.
    pub fn buffered(&self) -> usize {
        self.block
            .capacity()
            .saturating_add(self.meta.capacity())
            .saturating_add(self.head.capacity())
            .saturating_add(self.path.capacity())
            .saturating_add(self.link.capacity())
    }

    /// Reads `input`, calling `on_entry` for each entry completed; stops as soon as it breaks.
    pub fn push<F>(
        &mut self,
        mut input: &[u8],
        on_entry: &mut F,
    ) -> Result<ControlFlow<()>, TarError>
    where
        F: FnMut(&Entry<'_>) -> ControlFlow<()>,
    {
        while !input.is_empty() {
            match self.state {
                State::End => return Ok(ControlFlow::Continue(())),
                State::Header => {
                    let take = (BLOCK - self.block.len()).min(input.len());
                    self.block.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    if self.block.len() == BLOCK {
                        if let ControlFlow::Break(()) = self.header(on_entry)? {
                            return Ok(ControlFlow::Break(()));
                        }
                    }
                }
                State::Meta {
                    meta,
                    left,
                    padding,
                } => {
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    self.meta.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    let left = left - take as u64;
                    if left == 0 {
                        self.finish_meta(meta)?;
                        self.state = State::Skip { left: padding };
                    } else {
                        self.state = State::Meta {
                            meta,
                            left,
                            padding,
                        };
                    }
                }
                State::Head { want, rest } => {
                    let take = (want - self.head.len()).min(input.len());
                    self.head.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    if self.head.len() == want {
                        self.state = State::Skip { left: rest };
                        if let ControlFlow::Break(()) = self.emit(on_entry) {
                            return Ok(ControlFlow::Break(()));
                        }
                    }
                }
                State::Skip { left } => {
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    input = &input[take..];
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::Header
                    } else {
                        State::Skip { left }
                    };
                }
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The data ended: an error when it ended inside an entry. A layer that ends between
    /// entries without the end-of-archive blocks is accepted, as runtimes accept it.
    pub fn finish(&self) -> Result<(), TarError> {
        match self.state {
            State::End => Ok(()),
            State::Header if self.block.is_empty() => Ok(()),
            _ => Err(TarError::Truncated),
        }
    }

    fn header<F>(&mut self, on_entry: &mut F) -> Result<ControlFlow<()>, TarError>
    where
        F: FnMut(&Entry<'_>) -> ControlFlow<()>,
    {
        let block = std::mem::take(&mut self.block);
        let result = self.read_header(&block, on_entry);
        self.block = block;
        self.block.clear();
        result
    }

    fn read_header<F>(
        &mut self,
        block: &[u8],
        on_entry: &mut F,
    ) -> Result<ControlFlow<()>, TarError>
    where
        F: FnMut(&Entry<'_>) -> ControlFlow<()>,
    {
        if block.iter().all(|&b| b == 0) {
            self.state = State::End;
            return Ok(ControlFlow::Continue(()));
        }
        check_sum(block)?;
        self.entries = self.entries.saturating_add(1);
        let typeflag = block[156];
        let header_size = numeric(&block[124..136])?;
        match typeflag {
            b'L' | b'K' => {
                if header_size > MAX_PATH_LEN as u64 + 1 {
                    return Err(TarError::TooLong);
                }
                let meta = if typeflag == b'L' {
                    Meta::LongName
                } else {
                    Meta::LongLink
                };
                self.start_meta(meta, header_size);
                return Ok(ControlFlow::Continue(()));
            }
            b'x' => {
                if header_size > MAX_PAX_LEN as u64 {
                    return Err(TarError::PaxTooLarge);
                }
                self.start_meta(Meta::Pax, header_size);
                return Ok(ControlFlow::Continue(()));
            }
            b'g' => {
                // Global PAX records (creation tools' comments): nothing an entry needs.
                self.state = State::Skip {
                    left: padded(header_size)?,
                };
                return Ok(ControlFlow::Continue(()));
            }
            _ => {}
        }
        let size = self.pax_size.take().unwrap_or(header_size);
        let name = match (self.pax_path.take(), self.long_name.take()) {
            (Some(path), _) | (None, Some(path)) => path,
            (None, None) => ustar_name(block),
        };
        let link = match (self.pax_link.take(), self.long_link.take()) {
            (Some(link), _) | (None, Some(link)) => link,
            (None, None) => field(&block[157..257]),
        };
        if link.len() > MAX_PATH_LEN {
            return Err(TarError::TooLong);
        }
        let (kind, has_data) = match typeflag {
            b'0' | b'\0' | b'7' if name.ends_with('/') => (Kind::Dir, false),
            b'0' | b'\0' | b'7' => (Kind::File, true),
            b'1' => (Kind::Hardlink, false),
            b'2' => (Kind::Symlink, false),
            b'5' => (Kind::Dir, false),
            b'3' | b'4' | b'6' => (Kind::Other, false),
            b'D' => (Kind::Dir, true),
            _ => (Kind::Other, true),
        };
        self.path = path::normalize("/", &name).map_err(|_| TarError::TooLong)?;
        self.link = link;
        self.kind = kind;
        self.mode = u32::try_from(numeric(&block[100..108]).unwrap_or(0) & 0o7777).unwrap_or(0);
        self.head.clear();
        let data = if has_data { size } else { 0 };
        let skip = padded(data)?;
        if kind == Kind::File && data > 0 {
            let want = usize::try_from(data).unwrap_or(usize::MAX).min(HEAD_LEN);
            self.state = State::Head {
                want,
                rest: skip - want as u64,
            };
            return Ok(ControlFlow::Continue(()));
        }
        self.state = if skip == 0 {
            State::Header
        } else {
            State::Skip { left: skip }
        };
        Ok(self.emit(on_entry))
    }

    fn start_meta(&mut self, meta: Meta, size: u64) {
        self.meta.clear();
        let padding = padded(size).map_or(0, |p| p - size);
        self.state = if size == 0 {
            State::Skip { left: padding }
        } else {
            State::Meta {
                meta,
                left: size,
                padding,
            }
        };
        if size == 0 {
            // An empty extended header states nothing.
            let _ = self.finish_meta(meta);
        }
    }

    fn finish_meta(&mut self, meta: Meta) -> Result<(), TarError> {
        match meta {
            Meta::LongName => self.long_name = Some(field(&self.meta)),
            Meta::LongLink => self.long_link = Some(field(&self.meta)),
            Meta::Pax => {
                let records = std::mem::take(&mut self.meta);
                let parsed = self.pax(&records);
                self.meta = records;
                parsed?;
            }
        }
        self.meta.clear();
        Ok(())
    }

    /// PAX records `LEN KEY=VALUE\n`: `path`, `linkpath` and `size` are kept.
    fn pax(&mut self, mut records: &[u8]) -> Result<(), TarError> {
        const BAD: TarError = TarError::Malformed("a PAX record");
        while !records.is_empty() {
            let space = records.iter().position(|&b| b == b' ').ok_or(BAD)?;
            let len: usize = std::str::from_utf8(&records[..space])
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or(BAD)?;
            if len <= space + 1 || len > records.len() || records[len - 1] != b'\n' {
                return Err(BAD);
            }
            let record = &records[space + 1..len - 1];
            records = &records[len..];
            let Some(equals) = record.iter().position(|&b| b == b'=') else {
                return Err(BAD);
            };
            let (key, value) = (&record[..equals], &record[equals + 1..]);
            match key {
                b"path" | b"linkpath" => {
                    if value.len() > MAX_PATH_LEN {
                        return Err(TarError::TooLong);
                    }
                    let value = String::from_utf8_lossy(value).into_owned();
                    if key == b"path" {
                        self.pax_path = Some(value);
                    } else {
                        self.pax_link = Some(value);
                    }
                }
                b"size" => {
                    let size = std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or(BAD)?;
                    self.pax_size = Some(size);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn emit<F>(&mut self, on_entry: &mut F) -> ControlFlow<()>
    where
        F: FnMut(&Entry<'_>) -> ControlFlow<()>,
    {
        on_entry(&Entry {
            path: &self.path,
            kind: self.kind,
            link: &self.link,
            mode: self.mode,
            head: &self.head,
        })
    }
}

/// `size` rounded up to whole blocks.
fn padded(size: u64) -> Result<u64, TarError> {
    size.checked_add(BLOCK as u64 - 1)
        .map(|s| s / BLOCK as u64 * BLOCK as u64)
        .ok_or(TarError::Malformed("a size beyond any layer"))
}

/// A NUL-terminated header field as text.
fn field(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `prefix/name` of a POSIX ustar header, `name` of a GNU or v7 one.
fn ustar_name(block: &[u8]) -> String {
    let name = field(&block[..100]);
    if &block[257..263] != b"ustar\0" {
        return name;
    }
    let prefix = field(&block[345..500]);
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

/// A numeric field: octal text (spaces and NULs around it), or GNU base-256.
fn numeric(bytes: &[u8]) -> Result<u64, TarError> {
    const BAD: TarError = TarError::Malformed("a numeric field");
    if bytes.first().is_some_and(|b| b & 0x80 != 0) {
        if bytes[0] == 0xff {
            return Err(BAD);
        }
        let mut value = u64::from(bytes[0] & 0x7f);
        for &b in &bytes[1..] {
            value = value
                .checked_mul(256)
                .and_then(|v| v.checked_add(u64::from(b)))
                .ok_or(BAD)?;
        }
        return Ok(value);
    }
    let text = bytes
        .iter()
        .skip_while(|&&b| b == b' ' || b == 0)
        .take_while(|&&b| b != b' ' && b != 0);
    let mut value: u64 = 0;
    for &b in text {
        if !(b'0'..=b'7').contains(&b) {
            return Err(BAD);
        }
        value = value
            .checked_mul(8)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or(BAD)?;
    }
    Ok(value)
}

/// The header checksum: the sum of its bytes with the checksum field read as spaces, unsigned
/// or (old tars) signed.
fn check_sum(block: &[u8]) -> Result<(), TarError> {
    let stored = numeric(&block[148..156])?;
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    if stored == unsigned || i64::try_from(stored).is_ok_and(|s| s == signed) {
        Ok(())
    } else {
        Err(TarError::Malformed("a header checksum"))
    }
}

#[cfg(test)]
#[path = "tar/tests.rs"]
mod tests;
