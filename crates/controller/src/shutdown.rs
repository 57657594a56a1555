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
}
