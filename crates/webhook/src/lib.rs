//! noe-rs webhook: the `noe` binary's library. The command line ([`args`]), the HTTPS admission
//! server ([`server`], [`tls`], [`admission`]), the pure decision ([`decide`], [`patch`]), metrics
//! and health endpoints, and the `inspect` and `explain` subcommands.

pub mod admission;
pub mod args;
pub mod decide;
pub mod explain;
pub mod health;
pub mod inspect;
pub mod lookup;
pub mod memo;
pub mod metrics;
pub mod patch;
pub mod pull_secrets;
pub mod server;
pub mod tls;

/// The allocator settings the container image sets (`ENV` in the Dockerfile): memory freed after
/// a burst of registry lookups goes back to the OS at once instead of staying in mimalloc's
/// arenas until the next allocation burst, and arenas are committed as used rather than up
/// front. With them, 100k cached images take about 42 MiB RSS instead of 77 MiB
/// (docs/benchmarks.md). A binary run outside the image without them works the same, with more
/// resident memory.
pub const ALLOCATOR_ENV: [(&str, &str); 2] = [
    ("MIMALLOC_PURGE_DELAY", "0"),
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
];
