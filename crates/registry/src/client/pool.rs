//! Which registry hosts keep idle connections. reqwest (hyper's pool) caps idle connections per
//! host only, so a pod naming thousands of hosts would leave one idle connection per host for
//! the whole idle timeout. At most [`MAX_POOLED_HOSTS`] hosts at a time use the pooling client
//! (at most [`super::POOL_MAX_IDLE_PER_HOST`] idle connections each); a request to any other
//! host uses a client that keeps none, so its connection closes with its response. A host
//! leaves the table once it has had no request for longer than its idle connections can live.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Hosts whose idle connections are kept at one time.
pub const MAX_POOLED_HOSTS: usize = 16;

/// The hosts that pool their connections, with their last request.
#[derive(Debug)]
pub(crate) struct PooledHosts {
    /// How long after its last request a host's idle connections may still be open.
    linger: Duration,
    hosts: HashMap<String, Instant>,
}

impl PooledHosts {
    pub(crate) fn new(linger: Duration) -> Self {
        Self {
            linger,
            hosts: HashMap::new(),
        }
    }

    /// Whether a request to `host` at `now` may keep its connection idle; records it.
    pub(crate) fn admit(&mut self, host: &str, now: Instant) -> bool {
        if let Some(last) = self.hosts.get_mut(host) {
            *last = now;
            return true;
        }
        if self.hosts.len() >= MAX_POOLED_HOSTS {
            let linger = self.linger;
            self.hosts
                .retain(|_, last| now.saturating_duration_since(*last) <= linger);
        }
        if self.hosts.len() >= MAX_POOLED_HOSTS {
            return false;
        }
        self.hosts.insert(host.to_owned(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_flood_pools_only_the_first_hosts_until_they_go_quiet() {
        let start = Instant::now();
        let linger = Duration::from_secs(60);
        let mut pooled = PooledHosts::new(linger);
        for i in 0..MAX_POOLED_HOSTS {
            assert!(pooled.admit(&format!("r{i}.example"), start), "{i}");
        }
        for i in 0..1000 {
            assert!(!pooled.admit(&format!("flood{i}.example"), start), "{i}");
        }
        assert!(
            pooled.admit("r0.example", start),
            "a pooled host stays pooled"
        );
        assert_eq!(pooled.hosts.len(), MAX_POOLED_HOSTS);

        // r0 is used again; the others go quiet past the linger and make room.
        let later = start + linger / 2;
        assert!(pooled.admit("r0.example", later));
        let quiet = start + linger + Duration::from_secs(1);
        assert!(pooled.admit("new.example", quiet));
        assert!(
            pooled.hosts.contains_key("r0.example"),
            "still within its linger"
        );
        assert_eq!(pooled.hosts.len(), 2);
    }
}
