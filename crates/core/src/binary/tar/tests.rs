#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

/// What the reader handed out, owned.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    path: String,
    kind: Kind,
    link: String,
    mode: u32,
    head: Vec<u8>,
}

fn read(bytes: &[u8], chunk: usize) -> Result<Vec<Seen>, TarError> {
    let mut reader = TarReader::new();
    let mut seen = Vec::new();
    for piece in bytes.chunks(chunk.max(1)) {
        let _ = reader.push(piece, &mut |e: &Entry<'_>| {
            seen.push(Seen {
                path: e.path.to_owned(),
                kind: e.kind,
                link: e.link.to_owned(),
                mode: e.mode,
                head: e.head.to_vec(),
            });
            ControlFlow::Continue(())
        })?;
    }
    reader.finish()?;
    Ok(seen)
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header
}

/// A layer as image builders write one: a directory, a long-named executable, a symlink with
/// a long target, a hard link, a PAX-named file, a FIFO, a whiteout and an opaque marker.
fn layer() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let long_dir = format!("opt/{}", "d".repeat(150));
    b.append_data(
        &mut header(tar::EntryType::Directory, 0o755, 0),
        "usr/bin/",
        &[][..],
    )
    .unwrap();
    let big = vec![7u8; 5000];
    b.append_data(
        &mut header(tar::EntryType::Regular, 0o755, 5000),
        format!("{long_dir}/app"),
        &big[..],
    )
    .unwrap();
    b.append_link(
        &mut header(tar::EntryType::Symlink, 0o777, 0),
        "usr/bin/app",
        format!("/{long_dir}/app"),
    )
    .unwrap();
    b.append_link(
        &mut header(tar::EntryType::Link, 0o755, 0),
        "usr/bin/app2",
        format!("{long_dir}/app"),
    )
    .unwrap();
    b.append_pax_extensions([("path", &b"./srv/pax named/file"[..])])
        .unwrap();
    b.append_data(
        &mut header(tar::EntryType::Regular, 0o644, 3),
        "ignored-by-pax",
        &b"abc"[..],
    )
    .unwrap();
    b.append_data(
        &mut header(tar::EntryType::Fifo, 0o644, 0),
        "run/fifo",
        &[][..],
    )
    .unwrap();
    b.append_data(
        &mut header(tar::EntryType::Regular, 0o644, 0),
        "etc/.wh.motd",
        &[][..],
    )
    .unwrap();
    b.append_data(
        &mut header(tar::EntryType::Regular, 0o644, 0),
        "var/.wh..wh..opq",
        &[][..],
    )
    .unwrap();
    b.into_inner().unwrap()
}

fn expected() -> Vec<Seen> {
    let long_dir = format!("/opt/{}", "d".repeat(150));
    let entry = |path: &str, kind, link: &str, mode, head: &[u8]| Seen {
        path: path.to_owned(),
        kind,
        link: link.to_owned(),
        mode,
        head: head.to_vec(),
    };
    vec![
        entry("/usr/bin", Kind::Dir, "", 0o755, b""),
        entry(
            &format!("{long_dir}/app"),
            Kind::File,
            "",
            0o755,
            &[7; HEAD_LEN],
        ),
        entry(
            "/usr/bin/app",
            Kind::Symlink,
            &format!("{long_dir}/app"),
            0o777,
            b"",
        ),
        entry(
            "/usr/bin/app2",
            Kind::Hardlink,
            &format!("{}/app", &long_dir[1..]),
            0o755,
            b"",
        ),
        entry("/srv/pax named/file", Kind::File, "", 0o644, b"abc"),
        entry("/run/fifo", Kind::Other, "", 0o644, b""),
        entry("/etc/.wh.motd", Kind::File, "", 0o644, b""),
        entry("/var/.wh..wh..opq", Kind::File, "", 0o644, b""),
    ]
}

#[test]
fn a_layer_reads_the_same_in_any_chunking() {
    let bytes = layer();
    for chunk in [1, 7, 100, 511, 512, 513, 4096, bytes.len()] {
        assert_eq!(
            read(&bytes, chunk).unwrap(),
            expected(),
            "chunks of {chunk}"
        );
    }
}

#[test]
fn posix_ustar_prefixes_and_base256_sizes() {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o755);
    h.set_size(4);
    // ustar splits a long path into prefix and name.
    let deep = format!("{}/{}/bin", "p".repeat(90), "q".repeat(40));
    h.set_path(format!("{deep}/tool")).unwrap();
    h.set_cksum();
    b.append(&h, &b"\x7fELF"[..]).unwrap();
    let mut bytes = b.into_inner().unwrap();
    let seen = read(&bytes, 64).unwrap();
    assert_eq!(seen[0].path, format!("/{deep}/tool"));
    assert_eq!(seen[0].head, b"\x7fELF");

    // A GNU base-256 size (what writers use past 8 GiB) of 4 bytes.
    let size = &mut bytes[124..136];
    size.fill(0);
    size[0] = 0x80;
    size[11] = 4;
    rewrite_checksum(&mut bytes[..512]);
    assert_eq!(read(&bytes, 64).unwrap()[0].head, b"\x7fELF");
}

fn rewrite_checksum(block: &mut [u8]) {
    block[148..156].fill(b' ');
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    block[148..156].copy_from_slice(text.as_bytes());
}

#[test]
fn reading_stops_when_the_callback_breaks() {
    let bytes = layer();
    let mut reader = TarReader::new();
    let mut count = 0;
    let flow = reader
        .push(&bytes, &mut |_: &Entry<'_>| {
            count += 1;
            if count == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(flow, ControlFlow::Break(()));
    assert_eq!(count, 2);
}

#[test]
fn a_truncated_layer_fails_and_one_without_end_blocks_does_not() {
    let bytes = layer();
    // Inside the long-named file's data.
    assert_eq!(read(&bytes[..2500], 512), Err(TarError::Truncated));
    // Every entry and its padding, but not the two zero blocks.
    let end = bytes.len() - 1024;
    let without_end = &bytes[..end - end % 512];
    assert!(read(without_end, 512).is_ok());
}

fn gnu_meta(kind: u8, size: u64) -> Vec<u8> {
    let mut h = header(tar::EntryType::new(kind), 0o644, size);
    h.set_path("././@LongLink").unwrap();
    h.set_cksum();
    h.as_bytes().to_vec()
}

#[test]
fn hostile_headers_fail_without_buffering_what_they_claim() {
    // A long name of 1 GiB is refused at its header.
    let mut reader = TarReader::new();
    let refused = reader.push(&gnu_meta(b'L', 1 << 30), &mut |_: &Entry<'_>| {
        ControlFlow::Continue(())
    });
    assert_eq!(refused, Err(TarError::TooLong));
    assert!(reader.buffered() < 8 * 1024);
    // So is a PAX header larger than the bound.
    let mut reader = TarReader::new();
    let refused = reader.push(&gnu_meta(b'x', 1 << 20), &mut |_: &Entry<'_>| {
        ControlFlow::Continue(())
    });
    assert_eq!(refused, Err(TarError::PaxTooLarge));
    // A bad checksum is no tar.
    let mut block = gnu_meta(b'0', 0);
    block[0] ^= 1;
    let mut reader = TarReader::new();
    assert!(matches!(
        reader.push(&block, &mut |_: &Entry<'_>| ControlFlow::Continue(())),
        Err(TarError::Malformed(_))
    ));
    // A PAX record whose length lies.
    let mut b = tar::Builder::new(Vec::new());
    b.append_pax_extensions([("path", &b"x"[..])]).unwrap();
    let mut bytes = b.into_inner().unwrap();
    // `9 path=x\n` claims 8 bytes instead.
    assert_eq!(&bytes[512..514], b"9 ");
    bytes[512] = b'8';
    assert!(matches!(read(&bytes, 512), Err(TarError::Malformed(_))));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes: an answer (entries or an error), never a panic, buffers bounded.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let mut reader = TarReader::new();
        let _ = reader.push(&bytes, &mut |e: &Entry<'_>| {
            assert!(e.path.len() <= MAX_PATH_LEN && e.head.len() <= HEAD_LEN);
            ControlFlow::Continue(())
        });
        let _ = reader.finish();
        prop_assert!(reader.buffered() <= 3 * MAX_PAX_LEN);
    }

    /// A real layer with random bytes changed: the same.
    #[test]
    fn mutated_layers_never_panic(
        flips in proptest::collection::vec((0usize..8192, any::<u8>()), 1..16),
        chunk in 1usize..700,
    ) {
        let mut bytes = layer();
        for (at, value) in flips {
            let len = bytes.len();
            bytes[at % len] = value;
        }
        let _ = read(&bytes, chunk);
    }
}
