//! The runtime's shutdown signal, as every long-running part (reflector, lease loop,
//! controllers) waits for it.

use tokio::sync::watch;

/// A clonable shutdown signal.
#[derive(Clone, Debug)]
pub(crate) struct Shutdown(pub(crate) watch::Receiver<bool>);

impl Shutdown {
    /// Resolves once shutdown was asked (or the runtime is gone).
    pub(crate) async fn wait(&mut self) {
        while !*self.0.borrow_and_update() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }

    /// `work`'s output, or `None` when shutdown is asked first (`work` is then dropped).
    pub(crate) async fn or<F: std::future::Future>(&mut self, work: F) -> Option<F::Output> {
        tokio::select! {
            () = self.wait() => None,
            output = work => Some(output),
        }
    }
}

/// `stream` until `stop` resolves, then dropped at once with everything it owns. `take_until`
/// only stops polling its stream: a reflector's writer inside it would keep its store's
/// readiness pending forever, and kube-runtime's applier holds its runner until the store is
/// ready, so a stop before the first list completes would never end the applier. Dropped, the
/// writer resolves readiness (as "writer dropped") and the applier ends.
pub(crate) fn dropped_on_stop<S>(
    stream: S,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> impl futures::Stream<Item = S::Item> + Send + 'static
where
    S: futures::Stream + Send + 'static,
    S::Item: Send,
{
    use futures::StreamExt as _;
    let state = Some((stream.boxed(), Box::pin(stop)));
    futures::stream::unfold(state, |state| async move {
        let (mut stream, mut stop) = state?;
        // Returning `None` drops `stream` here.
        tokio::select! {
            biased;
            () = &mut stop => None,
            item = stream.next() => Some((item?, Some((stream, stop)))),
        }
    })
}
