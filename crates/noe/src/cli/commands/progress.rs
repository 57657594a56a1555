//! A progress line on stderr while `inspect` and `explain` wait for registries, shown only when
//! stderr is a terminal (never in pipes, files or CI logs).
//!
//! indicatif (console-rs, widely used, maintained) draws and clears the line and lets output be
//! printed above it without tearing; writing that by hand means terminal escape handling.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How many of `total` items are done; a no-op off a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Updates the bytes read (`inspect --verify`).
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// A progress line for `total` items of `what` (`images`, `documents`).
    pub fn new(total: usize, what: &'static str) -> Self {
        // One item needs no progress line.
        if !on_terminal() || total < 2 {
            return Self::hidden();
        }
        let bar = bar(
            total,
            &format!("{{pos}}/{{len}} {what} resolved {{wide_msg}}"),
        );
        Self {
            bar: Some(bar),
            ticker: None,
        }
    }

    /// No progress line (stderr is not a terminal).
    fn hidden() -> Self {
        Self {
            bar: None,
            ticker: None,
        }
    }

    /// A progress line for `total` images being verified, with the layer bytes `read` so far
    /// (shown for one image too: a verification may read tens of MiB).
    pub fn verifying(total: usize, read: Arc<AtomicU64>) -> Self {
        if !on_terminal() {
            return Self::hidden();
        }
        let bar = bar(total, "{pos}/{len} images verified, {wide_msg}");
        let shown = bar.clone();
        let ticker = tokio::spawn(async move {
            loop {
                let bytes = read.load(Ordering::Relaxed);
                shown.set_message(format!("{} of layers read", HumanBytes(bytes)));
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
        Self {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// Runs `print` with the line cleared, then counts one item done.
    pub fn done<R>(&self, print: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => {
                let out = bar.suspend(print);
                bar.inc(1);
                out
            }
            None => print(),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(ticker) = &self.ticker {
            ticker.abort();
        }
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn on_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// A bar of `total` items drawn on stderr with `template`, ticking on its own.
fn bar(total: usize, template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(u64::try_from(total).unwrap_or(u64::MAX)),
        ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
