//! The periodic recheck of every pod (a tag may have moved without the pod changing), as one
//! stream of references fed to the controller, spread over half the period: the controller's
//! queue then holds a few pods at a time instead of one scheduled entry per pod (at 150,000
//! pods those entries, with their copies of each pod's reference, were a third of the memory).

use std::time::Duration;

use futures::Stream;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::objects::PodRecord;

/// References emitted between two pauses.
const CHUNK: usize = 100;

/// Every `period`, every pod of `store`, spread over half the period.
pub(crate) fn stream(
    store: Store<PodRecord>,
    period: Duration,
) -> impl Stream<Item = ObjectRef<PodRecord>> + Send + 'static {
    futures::stream::unfold(
        (store, Vec::new(), Duration::ZERO),
        move |(store, mut pending, mut pause)| async move {
            loop {
                if let Some(pod) = pending.pop() {
                    if pending.len() % CHUNK == 0 {
                        tokio::time::sleep(pause).await;
                    }
                    let pod: std::sync::Arc<PodRecord> = pod;
                    return Some((ObjectRef::from_obj(&*pod), (store, pending, pause)));
                }
                tokio::time::sleep(period).await;
                pending = store.state();
                pause = chunk_pause(period, pending.len());
            }
        },
    )
}

/// The pause after each chunk so that `pods` are spread over half of `period`.
fn chunk_pause(period: Duration, pods: usize) -> Duration {
    let chunks = u32::try_from(pods.div_ceil(CHUNK).max(1)).unwrap_or(u32::MAX);
    (period / 2) / chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_spread_over_half_the_period() {
        let hour = Duration::from_secs(3600);
        assert_eq!(chunk_pause(hour, 0), hour / 2);
        assert_eq!(chunk_pause(hour, 100), hour / 2);
        assert_eq!(chunk_pause(hour, 150_000), Duration::from_secs(1800) / 1500);
        assert_eq!(chunk_pause(hour, usize::MAX), (hour / 2) / u32::MAX);
    }
}
