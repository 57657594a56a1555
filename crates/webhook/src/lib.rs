//! Webhook.

pub mod decide;
pub mod patch;
