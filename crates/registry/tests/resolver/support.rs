//! Helpers shared by the integration tests.

use std::time::Duration;

use noe_registry::{Config, Resolution, Resolver};

/// A resolver reaching `insecure` hosts over plain HTTP, with a short timeout.
pub fn resolver(insecure: &[String]) -> Resolver {
    resolver_with(Config {
        insecure_registries: insecure.to_vec(),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    })
}

/// A resolver from `config` with a 2 s timeout unless one is set, on a fresh metrics registry.
pub fn resolver_with(mut config: Config) -> Resolver {
    if config.request_timeout == Config::default().request_timeout {
        config.request_timeout = Duration::from_secs(2);
    }
    Resolver::new(config, &prometheus::Registry::new()).unwrap()
}

/// The platforms of a resolution as sorted strings.
pub fn platforms(resolution: &Resolution) -> Vec<String> {
    let mut platforms: Vec<String> = resolution
        .platforms
        .iter()
        .map(ToString::to_string)
        .collect();
    platforms.sort();
    platforms
}

/// `expected` sorted, for comparison with [`platforms`].
pub fn sorted(expected: &[String]) -> Vec<String> {
    let mut expected = expected.to_vec();
    expected.sort();
    expected
}
