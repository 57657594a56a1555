//! Verification against the real distribution registry: images whose layers the tests write
//! (synthetic ELF headers, scripts, links, whiteouts; plain, gzip and zstd), pushed through its
//! HTTP API, verified through the resolver; and a fake registry for what a real one will not
//! do (a lying size, a hang, a redirect to blob storage).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod verify {
    pub mod background;
    pub mod bounds;
    pub mod cached;
    pub mod connection;
    pub mod shapes;
    pub mod support;
}
