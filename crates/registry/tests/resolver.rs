//! Integration tests of `noe_registry::Resolver` against the real distribution registry, the
//! test token server, a test CA, and (for faults a registry will not produce) a fake registry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod resolver {
    pub mod auth;
    pub mod credentials;
    pub mod faults;
    pub mod fixtures;
    pub mod mtls;
    pub mod overrides;
    pub mod pool;
    pub mod renewal;
    pub mod revalidate;
    pub mod shapes;
    pub mod shared;
    pub mod shared_hostile;
    pub mod support;
    pub mod tls;
    pub mod upgrades;
}
