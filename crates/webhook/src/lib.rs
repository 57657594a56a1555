//! Webhook.

pub mod decide;
pub mod patch;
pub mod pull_secrets;
